"""The timing session every live command uses, driven by a fake clock: warm-up first, methods
interleaved per prompt with the order rotated, medians and ranges per pass. No real timing."""

import pytest

from replay.live.timing import WARMUP, Call, Spread, rotated, schedule, time_methods


class FakeClock:
    """Time moves only when a fake method says it worked."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def fake_methods(clock, cost, log):
    """Methods that record their calls and advance the clock by cost[(method, prompt, repeat)]."""

    def make(name):
        def run(prompt, repeat):
            log.append((name, prompt, repeat))
            clock.now += cost(name, prompt, repeat)
            return 10 * (prompt + 1)  # tokens: 10 on prompt 0, 20 on prompt 1, ...

        return run

    return {n: make(n) for n in ("A", "B", "C")}


def test_warm_up_then_every_prompt_runs_every_method_in_a_rotating_order():
    clock, log = FakeClock(), []
    timing = time_methods(fake_methods(clock, lambda *_: 1.0, log), prompts=2, repeats=3, clock=clock)
    # Written out by hand: warm-up of each method on prompt 0, then step s = pass * 2 + prompt runs
    # the methods rotated left by s.
    orders = ["ABC", "BCA", "CAB", "ABC", "BCA", "CAB"]  # steps 0..5
    want = [(m, 0, WARMUP) for m in "ABC"] + [(m, s % 2, s // 2) for s, order in enumerate(orders) for m in order]
    assert log == want
    assert [(t.call.method, t.call.prompt, t.call.repeat) for t in timing.trials] == want
    assert schedule(["A", "B", "C"], 2, 3) == [Call(*w) for w in want]
    # Every method is first equally often over the timed steps.
    firsts = [want[i][0] for i in range(3, len(want), 3)]
    assert sorted(firsts) == ["A", "A", "B", "B", "C", "C"]


def test_warm_up_is_not_counted_and_each_pass_sums_its_prompts():
    clock, log = FakeClock(), []

    def cost(name, prompt, repeat):
        if repeat == WARMUP:
            return 100.0  # a cold first call: must not show anywhere
        # A: passes take 3, 1, 2 s per prompt; B always 2 s; C: 4 s per prompt.
        return {"A": (3.0, 1.0, 2.0)[repeat], "B": 2.0, "C": 4.0}[name]

    timing = time_methods(fake_methods(clock, cost, log), prompts=2, repeats=3, clock=clock)
    a = timing.method("A")
    assert a.seconds == (6.0, 2.0, 4.0) and a.tokens == (30, 30, 30)  # 10 + 20 tokens per pass
    assert a.tokens_per_s == (5.0, 15.0, 7.5)
    assert a.rate == Spread(7.5, 5.0, 15.0)
    assert a.time == Spread(4.0, 2.0, 6.0)
    # Speedup of A over B pass by pass: B makes 30 tokens in 4 s (7.5 tok/s) every pass.
    assert timing.ratio("A", "B") == Spread(1.0, 5.0 / 7.5, 2.0)
    assert timing.ratio("C", "B") == Spread(0.5, 0.5, 0.5)
    body = timing.to_json()
    assert body["repeats"] == 3 and len(body["order"]) == 3 + 3 * 2 * 3
    assert body["methods"]["A"]["seconds"] == [6.0, 2.0, 4.0]
    assert body["load_before"]["cpus"] >= 1


def test_without_warm_up_and_a_single_method():
    clock, log = FakeClock(), []
    methods = {"A": fake_methods(clock, lambda *_: 0.5, log)["A"]}
    timing = time_methods(methods, prompts=3, repeats=1, clock=clock, warmup=False)
    assert log == [("A", 0, 0), ("A", 1, 0), ("A", 2, 0)]
    assert timing.method("A").rate == Spread(40.0, 40.0, 40.0)  # 60 tokens in 1.5 s


def test_rotation_and_bad_sessions():
    assert rotated([1, 2, 3], 4) == [2, 3, 1]
    with pytest.raises(ValueError, match="repeats >= 1"):
        schedule(["A"], 1, 0)
    with pytest.raises(KeyError, match="no timed method"):
        time_methods({"A": lambda p, r: 1}, 1, 1, clock=FakeClock()).method("Z")
