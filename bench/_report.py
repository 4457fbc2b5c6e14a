"""Performance targets, ratios and the markdown tables printed after a run."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["evaluate_targets", "markdown"]

LATENCY_ROWS = ("open", "echo", "pwd", "repl", "close", "concurrent")
CONTENDERS = ("raw", "proofs", "pexpect", "service", "tool")
LEVELS = ("service", "tool")
IDLE_LIMIT_KIB = 1024
RSS_BOUND_FACTOR = 4
"""Peak RSS growth during the 15 MB send must stay under this many scrollback caps."""


def _get(results: dict[str, Any], scenario: str, contender: str, key: str) -> float:
    value = results.get(scenario, {}).get(contender, {}).get(key)
    return float(value) if isinstance(value, (int, float)) else math.nan


def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(a) and not math.isnan(b) else math.nan


def _only_stdin_read(results: dict[str, Any], scenario: str, level: str) -> bool:
    reasons = results.get(scenario, {}).get(level, {}).get("wait_reasons") or {}
    return bool(reasons) and set(reasons) == {"stdin_read"}


def evaluate_targets(results: dict[str, Any], scrollback_cap: int) -> list[dict[str, Any]]:
    """Each performance target for the service and the tool level, with ``met``."""
    targets: list[dict[str, Any]] = []

    def add(name: str, level: str, measured: float, limit: str, met: bool, note: str = "") -> None:
        verdict: bool | None = None if math.isnan(measured) else met
        targets.append(
            {
                "target": name,
                "level": level,
                "measured": measured,
                "limit": limit,
                "met": verdict,
                "note": note if verdict is not None else "not measured in this run",
            }
        )

    bound_mib = RSS_BOUND_FACTOR * scrollback_cap / 2**20
    for level in LEVELS:
        # CPU time of the process per operation: what decides how many sessions a core
        # serves, and much steadier than wall time on a shared machine.
        cpu_x = _ratio(
            _get(results, "echo", level, "cpu_ms_per_send"),
            _get(results, "echo", "raw", "cpu_ms_per_send"),
        )
        add("echo CPU per send vs raw floor", level, cpu_x, "<= 2x", cpu_x <= 2)
        mb_x = _ratio(
            _get(results, "throughput", level, "cpu_ms_per_mb"),
            _get(results, "throughput", "raw", "cpu_ms_per_mb"),
        )
        add("CPU per MB of output vs raw reader", level, mb_x, "<= 1.3x", mb_x <= 1.3)
        echo = _get(results, "echo", level, "p50_ms")
        x_raw = _ratio(echo, _get(results, "echo", "raw", "p50_ms"))
        add("echo p50 vs raw floor", level, x_raw, "<= 10x", x_raw <= 10)
        x_pex = _ratio(echo, _get(results, "echo", "pexpect", "p50_ms"))
        add("echo p50 vs pexpect", level, x_pex, "<= 2x", x_pex <= 2)
        if level == "service":
            add("echo p50 vs raw floor (next)", level, x_raw, "<= 1.5x", x_raw <= 1.5)
        else:
            add("echo p50 vs pexpect (next)", level, x_pex, "<= 1x", x_pex <= 1)
        x_open = _ratio(
            _get(results, "open", level, "p50_ms"), _get(results, "open", "raw", "p50_ms")
        )
        add("open p50 vs raw floor", level, x_open, "<= 3x", x_open <= 3)
        repl = _get(results, "repl", level, "p50_ms")
        repl_ok = _only_stdin_read(results, "repl", level)
        add(
            "REPL 1+1 p50, all stdin_read",
            level,
            repl,
            "< 30 ms",
            repl < 30 and repl_ok,
            "" if repl_ok else "not all stdin_read",
        )
        add("REPL 1+1 p50 (next)", level, repl, "<= 2 ms", repl <= 2 and repl_ok)
        rate = _ratio(
            _get(results, "throughput", level, "mb_per_s_p50"),
            _get(results, "throughput", "raw", "mb_per_s_p50"),
        )
        add("15 MB send rate vs raw PTY rate", level, rate, ">= 0.70", rate >= 0.7)
        peak = _get(results, "throughput", level, "peak_rss_delta_mib")
        add(
            "15 MB send peak RSS growth (MiB)",
            level,
            peak,
            f"<= {bound_mib:.0f} ({RSS_BOUND_FACTOR}x cap)",
            peak <= bound_mib,
        )
        p99 = _get(results, "concurrent", level, "p99_ms")
        conc_ok = _only_stdin_read(results, "concurrent", level)
        conc = results.get("concurrent", {}).get(level, {})
        size = f"{conc.get('sessions', 'N')}x{conc.get('sends_per_session', 'M')}"
        add(
            f"{size} sends p99, all stdin_read",
            level,
            p99,
            "< 50 ms",
            p99 < 50 and conc_ok,
            "" if conc_ok else "not all stdin_read",
        )
        idle = _get(results, "idle_memory", level, "per_session_kib")
        limit = f"< {IDLE_LIMIT_KIB}"
        add("idle session RSS (KiB each)", level, idle, limit, idle < IDLE_LIMIT_KIB)
    ratios = results.get("records", {}).get("tool", {}).get("recording_x", {})
    for key, name in (
        ("echo_p50", "recording on: echo p50 vs off"),
        ("cpu_per_mb", "recording on: CPU per MB of output vs off"),
    ):
        value = ratios.get(key)
        measured = float(value) if isinstance(value, (int, float)) else math.nan
        add(name, "tool", measured, "<= 1.10x", measured <= 1.10)
    # SPEC §24, through the tools only (bench/scale.py)
    scale = results.get("scale", {}).get("tool", {})
    if scale:
        size = f"{scale['opened']}x{scale['sends_per_session']}"
        p99 = float(scale["send"]["p99_ms"])
        right = scale["wrong"] == 0 and set(scale["wait_reasons"]) == {"stdin_read"}
        note = "" if right else f"{scale['wrong']} wrong"
        add(
            f"scale {size} sends p99, 0 wrong", "tool", p99, "<= 250 ms", p99 <= 250 and right, note
        )
        dispose = float(scale["dispose_s"])
        clean = bool(scale["clean"]) and not scale["dispose_errors"]
        note = "" if clean else "left processes or failed"
        add(
            f"scale dispose of {scale['opened']} (s)",
            "tool",
            dispose,
            "<= 5",
            dispose <= 5 and clean,
            note,
        )
    else:
        add("scale sends p99, 0 wrong", "tool", math.nan, "<= 250 ms", False)
        add("scale dispose (s)", "tool", math.nan, "<= 5", False)
    _mcp_targets(results, add)
    # -- cpu group: SPEC §24, tool vs proofs in one worker, interleaved (bench/_cpu_ratio.py)
    cpu = results.get("cpu", {}).get("tool", {})
    ratio = cpu.get("tool_x_proofs", {}).get("block_medians")
    measured = float(ratio) if isinstance(ratio, (int, float)) else math.nan
    wrong = sum(int(cpu.get(c, {}).get("wrong", 0)) for c in ("proofs", "tool"))
    note = "" if not wrong else f"{wrong} not stdin_read"
    add(
        "echo CPU per send vs proofs (interleaved)",
        "tool",
        measured,
        "<= 2x",
        measured <= 2 and not wrong,
        note,
    )
    ratio = cpu.get("tool_p50_x_pexpect", {}).get("all_sends")
    measured = float(ratio) if isinstance(ratio, (int, float)) else math.nan
    add(
        "echo p50 vs pexpect (interleaved)",
        "tool",
        measured,
        "<= 0.6x",
        measured <= 0.6 and not wrong,
        note,
    )
    # -- end of cpu group
    return targets


# -- SPEC §24 "MCP overhead" (bench/mcp_transports.py, group "mcp") --------------------


def _mcp_targets(results: dict[str, Any], add: Any) -> None:
    """Server CPU per send over each transport vs the in-process CPU of the same run."""
    transports = results.get("mcp", {}).get("tool", {}).get("results", {})
    for transport, limit in (("stdio", 2.0), ("http", 3.0)):
        value = transports.get(transport, {}).get("server_cpu_x_in_process")
        measured = float(value) if isinstance(value, (int, float)) else math.nan
        add(
            f"MCP {transport}: server CPU per send vs in-process",
            "tool",
            measured,
            f"<= {limit:g}x",
            measured <= limit,
        )


def _fmt(value: float, digits: int = 2) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "-"
    return f"{value:.{digits}f}"


def _reasons(entry: dict[str, Any]) -> str:
    reasons = entry.get("wait_reasons")
    if not reasons:
        return ""
    text = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items()))
    retried = entry.get("retried_sends")
    return text if retried is None else f"{text} ({retried} looked again)"


def markdown(report: dict[str, Any]) -> str:
    """The whole result as markdown: machine, latency, throughput, memory, targets."""
    results = report["scenarios"]
    m = report["machine"]
    load = report["load"]
    lines = [
        f"Machine: {m['nproc']} CPUs, {m['cpu_model']}, {m['kernel']} ({m['arch']}), "
        f"Python {m['python']}. Load (1 min) {load['start'][0]:.2f} at start, "
        f"{load['end'][0]:.2f} at end. {report['started']}"
        + (" — QUICK SIZES, not representative" if report["quick"] else ""),
        "",
        "| scenario | contender | n | p50 ms | p95 ms | p99 ms | x raw (p50) | x pexpect (p50) "
        "| CPU us/send | CPU x raw | CPU x proofs | wait reasons |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    labels = {
        "open": "open (spawn to first prompt)",
        "echo": "`echo hi` round trip",
        "pwd": "`pwd` round trip",
        "repl": "Python REPL `1+1`",
        "close": "close idle session",
        "concurrent": "64 sessions x 100 sends",
    }
    for scenario in LATENCY_ROWS:
        block = results.get(scenario, {})
        raw = _get(results, scenario, "raw", "p50_ms")
        pex = _get(results, scenario, "pexpect", "p50_ms")
        raw_cpu = _get(results, scenario, "raw", "cpu_ms_per_send")
        proofs_cpu = _get(results, scenario, "proofs", "cpu_ms_per_send")
        for contender in CONTENDERS:
            entry = block.get(contender)
            if not entry:
                continue
            p50 = float(entry["p50_ms"])
            cpu = float(entry.get("cpu_ms_per_send", math.nan))
            label = labels[scenario]
            if scenario == "concurrent":
                label = f"{entry['sessions']} sessions x {entry['sends_per_session']} sends"
            lines.append(
                f"| {label} | {contender} | {entry['n']} | {_fmt(p50)} | "
                f"{_fmt(entry['p95_ms'])} | {_fmt(entry['p99_ms'])} | "
                f"{_fmt(_ratio(p50, raw), 1)} | {_fmt(_ratio(p50, pex), 1)} | "
                f"{_fmt(1000 * cpu, 0)} | {_fmt(_ratio(cpu, raw_cpu), 1)} | "
                f"{_fmt(_ratio(cpu, proofs_cpu), 1)} | {_reasons(entry)} |"
            )
    tp = results.get("throughput", {})
    if tp:
        any_entry = next(iter(tp.values()))
        lines += [
            "",
            f"Throughput: `seq 1 N` through one send, {any_entry['pty_bytes'] / 1e6:.1f} MB of "
            f"PTY output, scrollback capped at {report['scrollback_cap'] / 2**20:.0f} MiB.",
            "",
            "| contender | MB/s p50 | MB/s min | of raw rate | x pexpect | CPU ms/MB "
            "| CPU x raw | peak RSS growth MiB | scrollback kept | wait reasons |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        raw = _get(results, "throughput", "raw", "mb_per_s_p50")
        pex = _get(results, "throughput", "pexpect", "mb_per_s_p50")
        raw_cpu = _get(results, "throughput", "raw", "cpu_ms_per_mb")
        for contender in CONTENDERS:
            entry = tp.get(contender)
            if not entry:
                continue
            rate = float(entry["mb_per_s_p50"])
            kept = entry.get("scrollback_retained_bytes")
            kept_text = (
                f"{kept / 2**20:.2f} MiB / {entry['scrollback_retained_lines']} lines"
                if kept is not None
                else ""
            )
            lines.append(
                f"| {contender} | {_fmt(rate, 1)} | {_fmt(entry['mb_per_s_min'], 1)} | "
                f"{_fmt(100 * _ratio(rate, raw), 0)}% | {_fmt(_ratio(rate, pex), 2)} | "
                f"{_fmt(entry.get('cpu_ms_per_mb', math.nan), 1)} | "
                f"{_fmt(_ratio(float(entry.get('cpu_ms_per_mb', math.nan)), raw_cpu), 2)} | "
                f"{_fmt(entry['peak_rss_delta_mib'], 1)} | {kept_text} | {_reasons(entry)} |"
            )
    idle = results.get("idle_memory", {})
    if idle:
        lines += [
            "",
            "| idle sessions | contender | RSS before MiB | RSS after MiB | per session KiB |",
            "|---:|---|---:|---:|---:|",
        ]
        for contender in CONTENDERS:
            entry = idle.get(contender)
            if entry:
                lines.append(
                    f"| {entry['sessions']} | {contender} | {_fmt(entry['rss_before_mib'], 1)} | "
                    f"{_fmt(entry['rss_after_mib'], 1)} | {_fmt(entry['per_session_kib'], 0)} |"
                )
    records = results.get("records", {}).get("tool")
    if records:
        lines += [
            "",
            "Records off / recording / recording + audit log, tool level, rotating blocks "
            "(recorder CPU: the recorder process, another core):",
            "",
            "| mode | echo p50 ms | x off | echo CPU us/send | recorder CPU us/send "
            f"| {records['pty_bytes'] / 1e6:.1f} MB send CPU ms/MB | x off "
            "| recorder CPU ms/MB | MB/s p50 |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for mode in records["modes"]:
            entry, ratio = records[mode], records.get(f"{mode}_x", {})
            echo, tp = entry["echo"], entry["throughput"]
            lines.append(
                f"| {mode} | {_fmt(echo['p50_ms'], 3)} | {_fmt(ratio.get('echo_p50', 1.0), 3)} | "
                f"{_fmt(1000 * echo['cpu_ms_per_send'], 0)} | "
                f"{_fmt(1000 * echo['recorder_cpu_ms_per_send'], 0)} | "
                f"{_fmt(tp['cpu_ms_per_mb'], 2)} | {_fmt(ratio.get('cpu_per_mb', 1.0), 3)} | "
                f"{_fmt(tp['recorder_cpu_ms_per_mb'], 2)} | {_fmt(tp['mb_per_s_p50'], 1)} |"
            )
    scale = results.get("scale", {}).get("tool")
    if scale:
        send = scale["send"]
        lines += [
            "",
            f"Scale ({scale['sandbox']}): {scale['sessions']} sessions opened "
            f"{scale['open_concurrency']} at a time, {scale['sends_per_session']} sends each "
            "with all sessions at once, then the owner's dispose.",
            "",
            "| opened | open s | sends | p50 ms | p99 ms | wrong | RSS KiB/session "
            "| fds/session | dispose s | left |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
            f"| {scale['opened']} | {_fmt(scale['open_wall_s'], 1)} | {send['n']} | "
            f"{_fmt(send['p50_ms'], 0)} | {_fmt(send['p99_ms'], 0)} | {scale['wrong']} | "
            f"{_fmt(scale['rss_per_session_kib'], 1)} | {_fmt(scale['fds_per_session'], 1)} | "
            f"{_fmt(scale['dispose_s'])} | {'none' if scale['clean'] else 'SOME'} |",
        ]
    lines += _mcp_table(results)
    # -- cpu group (bench/_cpu_ratio.py)
    cpu = results.get("cpu", {}).get("tool")
    if cpu:
        x = cpu["tool_x_proofs"]
        lat = cpu.get("tool_p50_x_pexpect", {})
        lines += [
            "",
            f"CPU per `echo hi`, proofs and tool in one worker: {cpu['blocks']} interleaved "
            f"blocks of {cpu['block_sends']} sends each (first contender rotating). "
            f"tool / proofs: {_fmt(x['block_medians'])} of the block medians, "
            f"{_fmt(x['totals'])} of the totals, {_fmt(x['per_block_median'])} median of "
            f"the per-block ratios ({_fmt(x['per_block_min'])}-{_fmt(x['per_block_max'])}); "
            f"tool - proofs {_fmt(cpu['tool_minus_proofs_us'], 0)} us/send (median of the "
            f"per-block differences); idle CPU {_fmt(cpu['idle_cpu_ms_per_s'], 1)} ms/s. "
            f"tool p50 / pexpect p50: {_fmt(lat.get('all_sends', math.nan))} over all "
            f"sends, {_fmt(lat.get('per_block_median', math.nan))} median of the per-block "
            "ratios.",
            "",
            "| contender | sends | CPU us/send (total) | CPU us/send (block median) "
            "| p50 ms | wrong | wait reasons |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for contender in ("proofs", "tool", "pexpect"):
            entry = cpu[contender]
            lines.append(
                f"| {contender} | {entry['n']} | {_fmt(1000 * entry['cpu_ms_per_send'], 0)} | "
                f"{_fmt(1000 * entry['block_median_cpu_ms_per_send'], 0)} | "
                f"{_fmt(entry['p50_ms'], 3)} | {entry['wrong']} | {_reasons(entry)} |"
            )
    # -- end of cpu group
    lines += [
        "",
        "| target | level | measured | limit | result |",
        "|---|---|---:|---|---|",
    ]
    for target in report["targets"]:
        verdict = {True: "met", False: "**missed**", None: "-"}[target["met"]]
        if target["note"]:
            verdict += f" ({target['note']})"
        lines.append(
            f"| {target['target']} | {target['level']} | {_fmt(target['measured'])} | "
            f"{target['limit']} | {verdict} |"
        )
    return "\n".join(lines)


def _mcp_table(results: dict[str, Any]) -> list[str]:
    """The ``mcp`` group's rows: CPU per send, client and server, per transport."""
    transports = results.get("mcp", {}).get("tool", {}).get("results", {})
    if not transports:
        return []
    lines = [
        "",
        "MCP overhead (bench/mcp_transports.py): terminal_send `echo hi` per transport.",
        "",
        "| transport | p50 ms | client CPU ms | server CPU ms | server CPU / in-process |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in transports.items():
        lines.append(
            f"| {name} | {_fmt(row['p50_ms'])} | {_fmt(row['client_cpu_ms_per_send'], 3)} | "
            f"{_fmt(row['server_cpu_ms_per_send'], 3)} | "
            f"{_fmt(row['server_cpu_x_in_process'])}x |"
        )
    return lines
