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
