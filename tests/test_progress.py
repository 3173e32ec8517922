"""The progress of long work where stderr is a log, not a terminal."""

from inferlab.measure import progress


def test_a_log_gets_a_plain_line_at_most_every_interval(monkeypatch, capsys):
    clock = iter([0.0, 10.0, 70.0, 80.0, 140.0])  # start, then one reading per step
    monkeypatch.setattr(progress, "_clock", lambda: next(clock))
    with progress.progress_bar(4, "bench") as step:
        for name in ("a", "b", "c", "d"):
            step(name)
    err = capsys.readouterr().err.splitlines()  # pytest's capture is not a terminal
    assert err == ["bench: 2/4 after 70 s (b)", "bench: 4/4 after 140 s (d)"]


def test_a_log_gets_each_task_whole_and_its_completion(monkeypatch, capsys):
    """train's two tasks in a pipe: whole lines (a bar's columns were cut to 80 characters and
    lost their numbers), one at most every LOG_EVERY_S and one when a task completes."""
    clock = iter([0.0, 5.0, 61.0, 62.0, 62.0, 63.0, 64.0])  # one reading per call
    monkeypatch.setattr(progress, "_clock", lambda: next(clock))
    with progress.LogProgress() as bar:
        train = bar.add_task("training", total=3, info="")           # 0 s
        bar.update(train, advance=1, info="loss 2.5000")              # 5 s: too soon
        bar.update(train, advance=1, info="loss 2.1000")              # 61 s: a line
        bar.update(train, advance=1, info="loss 2.0000")              # 62 s: complete
        gen = bar.add_task("held-out generations", total=2, info="greedy, unmasked")  # 62 s
        bar.advance(gen)                                              # 63 s
        bar.advance(gen)                                              # 64 s: complete
    assert capsys.readouterr().err.splitlines() == [
        "training: 2/3 after 61 s (loss 2.1000)", "training: 3/3 after 62 s (loss 2.0000)",
        "held-out generations: 2/2 after 2 s (greedy, unmasked)"]
