"""What one random action does to Mario's running jump under the right_run action set
(right+B, right+A+B, right+A; SuperMarioBros-1-1-v0, 4 NES frames an agent step as the Mario
preset plays): run right+B for 12 agent steps, then hold right+A+B for 10 with one of them
replaced, then run on until he is down. Prints, per replaced step, the jump's height in pixels above where it
began and how far right Mario came down (x where he is back at the height he left from,
against the jump held throughout)."""
import gym_super_mario_bros
from nes_py.wrappers import JoypadSpace

RUN, RUN_JUMP, WALK_JUMP = 0, 1, 2  # right_run: right+B, right+A+B, right+A
RIGHT_RUN = [["right", "B"], ["right", "A", "B"], ["right", "A"]]
FRAMES = 4
UP = 12  # run-up, agent steps


def jump(steps: list[int]) -> tuple[int, int]:
    env = JoypadSpace(gym_super_mario_bros.make("SuperMarioBros-1-1-v0"), RIGHT_RUN)
    env.reset()
    ys, xs = [], []
    for t, a in enumerate([RUN] * UP + steps + [RUN] * 12):
        for _ in range(FRAMES):
            info = env.step(a)[-1]
        ys.append(info["y_pos"])
        xs.append(info["x_pos"])
        if t > UP and ys[-1] <= ys[UP - 1]:  # back down: stop before the goomba ahead
            break
    env.close()
    return max(ys) - ys[UP - 1], xs[-1] - xs[UP - 1]


if __name__ == "__main__":
    held = [RUN_JUMP] * 10
    h, d = jump(held)
    print(f"right+A+B held 10 agent steps after a run-up: {h} px high, down {d} px to the right")
    for name, other in (("right+B (no A: the jump is cut)", RUN), ("right+A (no B)", WALK_JUMP)):
        print(f"one step of {name}:")
        for k in range(7):
            cut = list(held)
            cut[k] = other
            h, d = jump(cut)
            print(f"  agent step {k + 1} of the jump: {h} px high, down {d} px to the right")
    h, d = jump([RUN_JUMP] + [RUN] * 9)
    print(f"a random hop (one step of right+A+B while running): {h} px high, down {d} px to the right")
