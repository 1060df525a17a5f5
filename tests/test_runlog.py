"""The run's log: plain lines when output is piped, a progress bar under the lines in a terminal."""
import io
import sys

from pipeline.records.runlog import RunLog


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_piped_output_gets_plain_lines_only(tmp_path, monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    log = RunLog(tmp_path, total_steps=1000)
    log("[MAIN] Epoch 1 - Loss: 0.1")
    log.progress(500)
    log.close()
    assert out.getvalue() == "[MAIN] Epoch 1 - Loss: 0.1\n"
    assert (tmp_path / "train.log").read_text() == "[MAIN] Epoch 1 - Loss: 0.1\n"


def test_terminal_gets_a_progress_bar_and_the_lines(tmp_path, monkeypatch):
    term = FakeTerminal()
    monkeypatch.setattr(sys, "stdout", term)
    log = RunLog(tmp_path, total_steps=1000)
    log.start_at(200)  # a resumed run
    log.progress(500)
    log("[MAIN] Epoch 1 - Loss: 0.1")
    log.progress(5000)  # never past the total
    assert log.bar.n == 1000
    log.close()
    text = term.getvalue()
    assert "[MAIN] Epoch 1 - Loss: 0.1\n" in text
    assert "\r" in text and "1.00k/1.00k" in text and "50%" in text
    assert (tmp_path / "train.log").read_text() == "[MAIN] Epoch 1 - Loss: 0.1\n"
