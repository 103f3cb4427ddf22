"""A kernel's counted behaviour (TestOutcome.detail["behaviour"], grader.harness.kernel_behaviour)
as the report shows it: the findings, a small plot of the counts as N grows, the same numbers as a
table, and a sentence that says what the plot shows for readers who cannot see it."""

from __future__ import annotations

import math

from grader.core.records import TestOutcome
from grader.render.figures import png_data_uri, pyplot


def _needed_tiles(probe: dict) -> int:
    """Key tiles a causal kernel that stops after each block's last row loads (the counts' own tile width)."""
    width = max(1, int(probe.get("widest_key_tile") or 1))
    return sum(math.ceil(seen / width) for seen in probe.get("keys_visible_per_program", []))


def _series(probes: list[dict], causal: bool, key: str) -> tuple[list[int], list[int]]:
    chosen = sorted((p for p in probes if p["causal"] == causal), key=lambda p: p["n"])
    return [p["n"] for p in chosen], [p[key] for p in chosen]


def plot_text(probes: list[dict]) -> str:
    """What the plot shows, in words (its text alternative)."""
    lengths, plain = _series(probes, False, "key_tiles")
    _, causal = _series(probes, True, "key_tiles")
    needed = [_needed_tiles(p) for p in sorted((p for p in probes if p["causal"]), key=lambda p: p["n"])]
    _, widest = _series(probes, False, "widest_tile")
    ns = ", ".join(str(n) for n in lengths)
    return (f"Two line charts of what your kernel did at N = {ns}. Left: key tiles loaded over the whole grid, "
            f"{', '.join(map(str, plain))} without the causal mask and {', '.join(map(str, causal))} with it "
            f"(a kernel that skips the tiles the mask hides loads {', '.join(map(str, needed))}). Right: the "
            f"widest tile a program computed, {', '.join(map(str, widest))} values.")


def plot_png(probes: list[dict]) -> str:
    """Key tiles loaded and the widest tile, against N, as an inline PNG."""
    plt = pyplot()
    fig, (tiles, widest) = plt.subplots(1, 2, figsize=(7.2, 2.6), dpi=90)
    lengths, plain = _series(probes, False, "key_tiles")
    causal_n, causal = _series(probes, True, "key_tiles")
    tiles.plot(lengths, plain, "o-", linewidth=3, markersize=7, alpha=0.5, label="not causal")
    if causal_n:
        tiles.plot(causal_n, causal, "s-", markersize=4, label="causal")
        needed = [_needed_tiles(p) for p in sorted((p for p in probes if p["causal"]), key=lambda p: p["n"])]
        tiles.plot(causal_n, needed, "k--", label="causal, skipping hidden tiles")
    tiles.set_title("key tiles loaded", fontsize=9)
    tiles.legend(fontsize=7)
    widest.plot(lengths, _series(probes, False, "widest_tile")[1], "o-")
    widest.set_title("widest tile a program holds (values)", fontsize=9)
    widest.set_ylim(bottom=0)
    for ax in (tiles, widest):
        ax.set_xlabel("N", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    return png_data_uri(fig)


def verdict_line(outcome: TestOutcome, probes: list[dict], findings: list[dict], task_failed: bool = False) -> dict:
    """The panel's closing line, read in the light of the verdict: "nothing to change" only when no finding
    was read from the counts AND every counted launch wrote the right output, the test passed and no other
    test of its task failed (`task_failed`); a wrong output is never called fine because its counts look
    efficient. {"status": "passed" | "failed" | "muted", "text": ...}."""
    wrong = sum(1 for p in probes if not p.get("output_right", True))
    if outcome.status == "passed" and not wrong and not findings and task_failed:
        return {"status": "muted", "text": "The counts show no wasted work here, but other tests of this task "
                                           "failed: fix the cause shown above first."}
    if outcome.status == "passed" and not wrong and not findings:
        return {"status": "passed", "text": "Nothing to change: no wasted tiles, no whole rows of scores, a rescale "
                                            "wherever the maximum can grow."}
    if wrong or outcome.status != "passed":
        launches = f"{wrong} of {len(probes)} counted launches" if wrong else "this test"
        return {"status": "failed", "text": f"The output is wrong ({launches}): fix the cause shown above first. The "
                                            f"counts below say how the kernel works, not that its result is right."}
    return {"status": "muted", "text": ""}


def behaviour_view(outcome: TestOutcome, task_failed: bool = False) -> dict | None:
    """The report's block for one test's counted behaviour (None when the test recorded none);
    `task_failed`: another test of the same task failed (the closing line says so)."""
    recorded = outcome.detail.get("behaviour") if outcome.detail else None
    if not recorded:
        return None
    probes = list(recorded.get("probes") or [])
    rows = [{"n": p["n"], "causal": "yes" if p["causal"] else "no",
             "tiles": f"{p['key_tiles']} ({', '.join(map(str, p['key_tiles_per_program']))})",
             "multiply_adds": p["multiply_adds"], "widest": p["widest_tile"], "rescales": p["rescales"],
             "stored": p["bytes_stored"], "outside": p["outside_loads"] + p["outside_stores"]}
            for p in sorted(probes, key=lambda p: (p["n"], p["causal"]))]
    measured = bool(recorded.get("measured")) and bool(probes)
    findings = list(recorded.get("findings") or [])
    return {"name": outcome.name, "measured": measured, "reason": recorded.get("reason", ""),
            "findings": findings, "rows": rows,
            "verdict": verdict_line(outcome, probes, findings, task_failed) if measured else {},
            "plot": plot_png(probes) if measured else None, "plot_text": plot_text(probes) if measured else ""}
