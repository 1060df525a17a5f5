"""The command line as a user meets it when something is wrong: one line naming the problem with
a hint, exit code 2, and nothing left on disk."""
import subprocess
import sys

import pytest

from mario_rl_optimized import cli, main
from tests.proc_utils import ROOT
from tests.run_folders import CATCH


def test_a_value_that_does_not_parse_is_one_line_with_an_example_not_the_usage_block():
    out = subprocess.run([sys.executable, "mario_rl_optimized.py", "--lr", "abc"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == ["error: argument --lr: 'abc' is not a number; e.g. --lr 0.0001"]


@pytest.mark.parametrize("argv,line", [
    (["--gama", "0.9"], "error: unrecognized arguments: --gama 0.9; --gama: did you mean --gamma?"),
    (["--learning-rate", "3e-4"], "--learning-rate: did you mean --lr?"),  # CleanRL's and SB3's name for it
    (["--run_dir", "runs/x"], "--run_dir: did you mean --run-dir?"),
    (["--evel", "runs/x"], "--evel: did you mean --eval?"),
    (["--amp", "maybe"], "error: argument --amp: expected true or false, got 'maybe' (--help lists every option)"),
    (["--total-steps", "1e6"], "error: argument --total-steps: '1e6' is not a whole number; e.g. --total-steps 5000000"),
    (["--eval", "runs/x", "--episodes", "ten"], "'ten' is not a whole number; e.g. --episodes 10"),
    (["--lr"], "error: argument --lr: expected one argument (--help lists every option)"),
    (["runs/x"], "error: unrecognized arguments: runs/x (each option starts with --; --help lists them)"),
])
def test_a_command_line_that_does_not_parse_is_one_line_with_a_hint(argv, line, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == ""
    assert len(err.splitlines()) == 1 and line in err
    assert list(tmp_path.iterdir()) == []


def test_the_other_commands_parse_the_same_way(capsys):
    for run in (lambda: cli(["train", "--gama", "0.9"]), lambda: cli(["config", "--gama", "0.9"])):
        with pytest.raises(SystemExit) as e:
            run()
        assert e.value.code == 2
        assert capsys.readouterr().err.splitlines() == [
            "error: unrecognized arguments: --gama 0.9; --gama: did you mean --gamma?"]


def test_a_refused_run_without_run_dir_leaves_no_runs_folder(capsys, tmp_path, monkeypatch):
    """The run folder is made (runs/NAME) before the settings are checked against it; refused, the
    run leaves neither it nor the runs/ made for it, and a runs/ that was there stays."""
    monkeypatch.chdir(tmp_path)
    assert main(["--env", CATCH, "--gamma", "2"]) == 2
    assert "--gamma 2.0: must be in (0, 1]" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "runs").mkdir()
    assert main(["--env", CATCH, "--gamma", "2"]) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["runs"] and list((tmp_path / "runs").iterdir()) == []


def test_push_to_hub_with_no_runs_says_so_without_naming_resume(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["--push-to-hub", "someone/agent"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == ["error: --push-to-hub someone/agent: no run under runs/ to share; train one first, "
                                "or pass --run-dir with the run's folder"]
    assert "--resume" not in err


def _option_line(text: str, option: str) -> str:
    return next(line for line in text.splitlines() if line.split()[:1] == [option])


def test_help_with_an_env_gives_the_values_that_game_trains_with(capsys):
    assert main(["--help", "--env", "ALE/Pong-v5"]) == 0
    out = capsys.readouterr().out
    assert "its value for ALE/Pong-v5 on this machine" in out
    assert _option_line(out, "--env").split()[1:3] == ["ALE/Pong-v5", "(given)"]
    assert _option_line(out, "--replay-ratio").split()[1:3] == ["8.0", "(Atari)"]
    assert _option_line(out, "--mario-actions").split()[1] == "simple" and "Atari" not in _option_line(out, "--gamma")
    assert main(["--env", "ALE/Pong-v5", "--replay-ratio", "4", "--help"]) == 0  # the other options count too
    assert _option_line(capsys.readouterr().out, "--replay-ratio").split()[1:3] == ["4.0", "(given)"]


def test_help_in_a_terminal_cuts_each_line_to_its_width():
    from pipeline.settings.cli import build_parser
    from pipeline.settings.help import help_text

    parser = build_parser()
    text = help_text(parser, parser.parse_args(["--env", "ALE/Pong-v5"]), width=80)
    options = [line for line in text.splitlines() if line.startswith("  --")]
    assert len(options) > 100 and all(len(line) <= 80 for line in options)
    assert any(line.endswith("…") for line in options)


def test_help_for_an_unknown_env_is_one_line(capsys):
    assert main(["--help", "--env", "ALE/Pnog-v5"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "Did you mean ALE/Pong-v5" in err


def test_every_error_a_user_fixes_is_one_type_the_command_lines_print_as_one_line(capsys, tmp_path):
    """``UserError``: bad input (ConfigError) and the run files a user can fix (a checkpoint, a
    saved replay, a Hub refusal) are one type, which each command line turns into one line, exit
    code 2; the file errors stay RuntimeErrors, as the run's own handlers catch them."""
    import benchmark_performance
    from config_optimized import ConfigError, UserError
    from pipeline.records.checkpoint import CheckpointError
    from pipeline.records.hub import HubError
    from pipeline.records.replay_snapshot import ReplayFileError

    assert issubclass(ConfigError, UserError) and issubclass(ConfigError, ValueError)
    for kind in (CheckpointError, ReplayFileError, HubError):
        assert issubclass(kind, UserError) and issubclass(kind, RuntimeError)
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes(b"not a checkpoint")
    assert main(["--eval", str(damaged)]) == 2  # a CheckpointError
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and str(damaged) in err[0]
    assert benchmark_performance.main(["--value-check", str(tmp_path / "no-run")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
