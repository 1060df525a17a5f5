"""--collector-device: collectors choose actions on the CPU or on the learner's CUDA GPU. The
settings are checked on any machine; the GPU path itself runs where CUDA is (bench/gpu/check.sh
runs this file)."""
import pytest
import torch

from config_optimized import Config, ConfigError
from models import NetworkSpec, build_model
from pipeline.actors.rollout import Rollout
from pipeline.settings.check import validate
from pipeline.settings.hardware import Hardware
from tests.noise_envs import NoiseEnvs


def _hw(cuda):
    return Hardware(2, 24 << 30, 20 << 30, "test cpu", True, cuda, "GPU" if cuda else None, 8 << 30 if cuda else 0,
                    False)


def test_collectors_on_cuda_need_cuda_and_a_start_method_that_can_hold_it():
    with pytest.raises(ConfigError, match="CUDA is not available on this machine; use --collector-device cpu"):
        validate(Config.of(collector_device="cuda"), _hw(False))
    with pytest.raises(ConfigError, match="add --start-method spawn"):
        validate(Config.of(collector_device="cuda", start_method="fork", device="cuda"), _hw(True))
    validate(Config.of(collector_device="cuda", device="cuda"), _hw(True))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (bench/gpu/check.sh runs it)")
@pytest.mark.parametrize("act_bf16", [False, True])
def test_a_cuda_collector_device_picks_the_cpu_collectors_greedy_actions(act_bf16):
    torch.manual_seed(0)
    cpu_model = build_model(NetworkSpec("batchnorm", 4, 6, quantiles=51)).eval()
    gpu_model = build_model(NetworkSpec("batchnorm", 4, 6, quantiles=51)).eval()
    gpu_model.load_state_dict(cpu_model.state_dict())
    gpu_model = gpu_model.to("cuda")
    cpu, gpu = Rollout(NoiseEnvs(8), cpu_model, 4, False, seed=0), Rollout(NoiseEnvs(8), gpu_model, 4, False, seed=0,
                                                                        act_bf16=act_bf16)
    assert gpu.device.type == "cuda" and gpu.policy is gpu_model  # no host-side acting copy on a GPU
    same = 0
    for _ in range(5):
        _, a, _, _ = cpu.step(0.0)
        _, b, _, _ = gpu.step(0.0)
        same += int((a["action"] == b["action"]).sum())
    # fp32 (TF32 off in a fresh process unless the learner set it): every action; bf16 rounds
    # near-ties apart, so most
    assert same >= (40 if not act_bf16 else 30), same
