"""What a FlashAttention forward kernel does as N and causality vary, from counts taken on the CPU.

A kernel task is graded by construction: the grader launches the student's vetted kernel
itself (grader.harness.contract) in the kernel worker, and under Triton's interpreter that
worker counts what each launch did (grader.sandbox.kernel_counts: per program, the loads and
stores per argument, tl.dot work and its widest tile, the exponentials). A hidden test probes
the kernel at a few lengths, causal and not, and hands the counts here:

* `check_counts` cross-checks one launch's counts with what the trusted side knows (the
  launch's grid for these shapes, the output elements it received written) before any of
  them is believed;
* `summarise` turns them into a few numbers per probe (key tiles per program, keys loaded,
  multiply-adds, widest tile, rescale factors, elements outside every tensor);
* `findings` reads a misconception from the numbers: a causal kernel that visits key tiles
  the mask hides (no block skipping), a kernel that holds a whole row block of scores at
  once (no loop over key tiles), a kernel whose output is wrong and that never computes a
  rescale factor, loads or stores outside every tensor.

Findings are feedback, never points: the output decides flash_forward, and speed is paid
for in flash_speed where a GPU times it (docs/AUTHORING.md, "Kernel behaviour").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

# The contract's argument positions of the forward kernel (assignments/assignment3/contract.py).
Q, K, V, OUT, LSE = 0, 1, 2, 3, 4
SECTION = "§24"


@dataclass(frozen=True)
class Probe:
    """One launch measured: its shapes and flags, the counts the kernel worker took, and whether
    its output was right (judged by the trusted side)."""

    n_q: int
    n_kv: int
    head_dim: int
    batch_heads: int  # B · H (the grid's second axis)
    causal: bool
    counts: dict  # one launch record of grader.sandbox.kernel_counts
    output_right: bool
    output_written: int  # elements of the output the trusted side received that are not NaN


@dataclass(frozen=True)
class Finding:
    """A behaviour read from the counts, with the numbers behind it."""

    id: str
    title: str
    section: str
    text: str

    def to_dict(self) -> dict:
        return asdict(self)


def _programs(counts: dict) -> dict[tuple[int, int, int], dict]:
    return {tuple(int(i) for i in key.split(",")): value for key, value in counts.get("programs", {}).items()}


def _moved(program: dict, kind: str, position: int) -> tuple[int, int]:
    """(calls, elements moved) of one program's loads or stores on one argument."""
    calls, elements, *_ = program.get(kind, {}).get(str(position), (0, 0, 0))
    return int(calls), int(elements)


def _tile(programs: dict, kind: str, position: int, head_dim: int) -> int:
    """The widest tile, in rows or keys (lanes / head_dim), any program loaded or stored on one argument."""
    lanes = [int(p.get(kind, {}).get(str(position), (0, 0, 0))[2]) for p in programs.values()]
    return max(lanes, default=0) // max(1, head_dim)


def check_counts(probe: Probe) -> str | None:
    """Why these counts cannot be believed (None when they agree with what the trusted side knows):
    the grid must be (row blocks, B · H), every program recorded, and the elements stored into Out
    at least the output elements the trusted side received written."""
    counts = probe.counts
    grid = counts.get("grid") or []
    programs = _programs(counts)
    if len(grid) != 3 or grid[1] != probe.batch_heads or grid[2] != 1 or counts.get("programs_dropped"):
        return f"the launch's grid {grid} is not (row blocks, {probe.batch_heads}, 1)"
    if len(programs) != grid[0] * grid[1]:
        return f"{len(programs)} programs were counted for the grid {grid}"
    rows = _tile(programs, "loads", Q, probe.head_dim)
    if rows < 1 or math.ceil(probe.n_q / rows) != grid[0]:
        return f"the grid {grid} is not one program per {rows} query rows of {probe.n_q}"
    stored = sum(_moved(p, "stores", OUT)[1] for p in programs.values())
    if stored < probe.output_written:
        return f"{probe.output_written} output elements were written but only {stored} stores into Out were counted"
    return None


def summarise(probe: Probe) -> dict:
    """A few numbers per probe (all from the counts, per program or summed over the grid)."""
    counts = probe.counts
    programs = _programs(counts)
    rows = _tile(programs, "loads", Q, probe.head_dim)  # query rows per program (BLOCK_M)
    one_head = sorted((index, p) for index, p in programs.items() if index[1] == 0)
    tiles = [_moved(p, "loads", K)[0] for _, p in one_head]  # key tiles loaded by each row block
    keys = [_moved(p, "loads", K)[1] // max(1, probe.head_dim) for _, p in one_head]
    widest_key_tile = _tile(programs, "loads", K, probe.head_dim)  # BLOCK_N, or whatever the kernel loads at once
    offset = probe.n_kv - probe.n_q
    visible = [min(probe.n_kv, (m + 1) * rows + offset) if probe.causal else probe.n_kv for m in range(len(one_head))]
    return {
        "n": probe.n_q, "n_kv": probe.n_kv, "causal": probe.causal, "rows_per_program": rows,
        "programs": len(programs), "key_tiles_per_program": tiles, "keys_loaded_per_program": keys,
        "keys_visible_per_program": visible, "widest_key_tile": widest_key_tile,
        "key_tiles": sum(_moved(p, "loads", K)[0] for p in programs.values()),
        "keys_loaded": sum(_moved(p, "loads", K)[1] for p in programs.values()) // max(1, probe.head_dim),
        "multiply_adds": sum(p.get("dot_macs", 0) for p in programs.values()),
        "widest_tile": max((p.get("widest_dot", 0) for p in programs.values()), default=0),
        "rescales": sum(p.get("row_exps", 0) for p in programs.values()),
        "bytes_stored": _bytes_stored(counts, programs),
        "outside_loads": sum(p.get("outside_loads", 0) for p in programs.values()),
        "outside_stores": sum(p.get("outside_stores", 0) for p in programs.values()),
        "output_right": probe.output_right,
    }


def _bytes_stored(counts: dict, programs: dict) -> int:
    sizes = {int(a["position"]): int(a.get("element_bytes", 0)) for a in counts.get("arguments", [])}
    total = 0
    for program in programs.values():
        for position, (_calls, elements, *_lanes) in program.get("stores", {}).items():
            total += int(elements) * sizes.get(int(position), 0)
    return total


def _largest(summaries: list[dict], causal: bool) -> dict | None:
    chosen = [s for s in summaries if s["causal"] == causal]
    return max(chosen, key=lambda s: s["n"]) if chosen else None


def _no_block_skipping(summaries: list[dict]) -> Finding | None:
    causal = _largest([s for s in summaries if s["programs"] >= 2 and s["widest_key_tile"]], True)
    if causal is None:
        return None
    width = causal["widest_key_tile"]
    extra = [tiles - math.ceil(seen / width) for tiles, seen in
             zip(causal["key_tiles_per_program"], causal["keys_visible_per_program"], strict=True)]
    wasted = sum(e for e in extra if e > 0)
    if wasted <= 0:
        return None
    first = causal["key_tiles_per_program"][0]
    plain = next((s for s in summaries if not s["causal"] and s["n"] == causal["n"]), None)
    compared = (f", as many as without the mask ({plain['key_tiles']})" if plain and
                plain["key_tiles"] <= causal["key_tiles"] else "")
    return Finding(
        "kernel_no_causal_block_skipping", "a causal kernel that visits key tiles the mask hides", SECTION,
        f"At N = {causal['n']}, causal, your kernel loaded {causal['key_tiles']} key tiles{compared}; "
        f"{wasted} of them hold only keys after every row of the program that loaded them (the first "
        f"{causal['rows_per_program']} rows see keys 0–{causal['keys_visible_per_program'][0] - 1}, yet their "
        f"program loaded {first} tile(s) of {width} keys). The output is right, but that work is thrown away: "
        f"stop the key loop after the block's last row (hi = min(N, (pid_m + 1) · BLOCK_M), as the stub does), "
        f"which halves causal attention's work for long sequences. On a GPU this costs time in flash_speed; "
        f"here it costs no points.")


def _whole_rows(summaries: list[dict]) -> Finding | None:
    plain = _largest(summaries, False)
    if plain is None or plain["n_kv"] < 128:
        return None
    if not plain["key_tiles_per_program"] or any(t != 1 for t in plain["key_tiles_per_program"]) or \
            any(k < plain["n_kv"] for k in plain["keys_loaded_per_program"]):
        return None
    tiles = ", ".join(f"N = {s['n']}: {s['widest_tile']}" for s in sorted(summaries, key=lambda s: s["n"])
                      if not s["causal"])
    return Finding(
        "kernel_scores_held_whole", "a whole row block of scores held at once (no loop over key tiles)", SECTION,
        f"At N = {plain['n']} each program loaded all {plain['n_kv']} keys in one {plain['widest_key_tile']}-key tile "
        f"and scored its {plain['rows_per_program']} rows against every key at once (its widest tile, in values: "
        f"{tiles}). "
        f"That is the N × N score matrix held one row block at a time: a program's memory must grow with the "
        f"longest sequence. FlashAttention walks over the keys BLOCK_N at a time with a running maximum and sum, "
        f"so a program holds BLOCK_M × BLOCK_N scores whatever N is.")


def _no_rescale(summaries: list[dict]) -> Finding | None:
    wrong = [s for s in summaries if not s["output_right"] and max(s["key_tiles_per_program"] or [0]) >= 2]
    if not wrong or any(s["rescales"] for s in wrong):
        return None
    worst = max(wrong, key=lambda s: s["key_tiles"])
    return Finding(
        "kernel_no_rescale", "no rescale factor computed while the running maximum changes", SECTION,
        f"At N = {worst['n']}{', causal' if worst['causal'] else ''} your kernel walked over {worst['key_tiles']} "
        f"key tiles ({max(worst['key_tiles_per_program'])} per program) but computed no per-row exponential such "
        f"as e^(m − m_new): nothing rescales what was accumulated against an older maximum, and the output is "
        f"wrong. Multiply l and acc by e^(m − m_new) whenever a tile raises the maximum.")


def _outside(summaries: list[dict]) -> Finding | None:
    touched = [s for s in summaries if s["outside_loads"] or s["outside_stores"]]
    if not touched:
        return None
    shown = "; ".join(f"N = {s['n']}{' causal' if s['causal'] else ''}: {s['outside_loads']} loaded, "
                      f"{s['outside_stores']} stored" for s in touched[:4])
    return Finding(
        "kernel_outside_tensors", "loads or stores outside every tensor", SECTION,
        f"Some lanes of your tl.load / tl.store calls were not masked and fell outside every tensor the "
        f"kernel was given ({shown} elements). The interpreter reads garbage there (a GPU may fault): mask "
        f"every load and store whose rows or keys can run past N.")


def findings(summaries: list[dict]) -> list[Finding]:
    """What the counts say, each with its numbers (none for the reference kernel)."""
    found = [f(summaries) for f in (_no_block_skipping, _whole_rows, _no_rescale, _outside)]
    return [f for f in found if f is not None]


def output_written(output: torch.Tensor) -> int:
    """Elements of a launcher's output the kernel wrote (the launcher fills it with NaN first)."""
    return int((~torch.isnan(output.detach().float())).sum()) if isinstance(output, torch.Tensor) else 0


def behaviour(probes: list[Probe]) -> dict:
    """The record a report shows: every probe's numbers and the findings, or why nothing was counted
    (a compiled kernel is not counted; counts that disagree with the trusted side are not used)."""
    if not probes or any(not p.counts for p in probes):
        return {"measured": False, "reason": "counted only when Triton's interpreter runs the kernel (on the CPU)",
                "probes": [], "findings": []}
    for probe in probes:
        problem = check_counts(probe)
        if problem is not None:
            return {"measured": False, "reason": f"the counts were not used: {problem}", "probes": [],
                    "findings": []}
    summaries = [summarise(p) for p in probes]
    return {"measured": True, "reason": "", "probes": summaries,
            "findings": [f.to_dict() for f in findings(summaries)]}
