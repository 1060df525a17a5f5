"""How much of Mario's jump one action without A takes away (SuperMarioBros-1-1-v0, the five
right-moving actions, 4 NES frames an agent step as the Mario preset plays): walk right 10 agent
steps, then hold right+A for 10, with one of the first seven replaced by right (no A), then walk
on. Prints the jump's height in pixels above where it began, for each step replaced."""
import gym_super_mario_bros
from gym_super_mario_bros.actions import RIGHT_ONLY
from nes_py.wrappers import JoypadSpace

RIGHT, RIGHT_A = 1, 2  # RIGHT_ONLY: NOOP, right, right+A, right+B, right+A+B
FRAMES = 4


def jump_height(jump: list[int]) -> int:
    env = JoypadSpace(gym_super_mario_bros.make("SuperMarioBros-1-1-v0"), RIGHT_ONLY)
    env.reset()
    ys = []
    for a in [RIGHT] * 10 + jump + [RIGHT] * 12:
        for _ in range(FRAMES):
            info = env.step(a)[-1]
        ys.append(info["y_pos"])
    env.close()
    return max(ys) - ys[9]


if __name__ == "__main__":
    held = [RIGHT_A] * 10
    print(f"right+A held 10 agent steps: {jump_height(held)} px")
    for k in range(7):
        cut = list(held)
        cut[k] = RIGHT
        print(f"agent step {k + 1} of the jump without A: {jump_height(cut)} px")
