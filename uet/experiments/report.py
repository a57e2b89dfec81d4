"""What a run leaves behind: the summary table on the terminal and the files in DIR.

:func:`write_outputs` is the runner's last step: time series, plots and results.json.
:func:`summary_table` / :func:`print_summary` render the summary with rich.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from uet.experiments import plot_worker, timeseries
from uet.experiments.results import write_results


def _num(v: Any, fmt: str = ",.1f") -> str:
    if v is None:
        return "-"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return format(v, fmt)


def _counts(d: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in d.items()) if d else ""


#: retransmission causes (PDS ``retx.<cause>``), short
_CAUSES = {"rack": "RACK", "sack": "a SACK gap", "rto": "an RTO", "ack_req": "an ACK_REQ",
           "ooo": "reordering", "clear_req": "a CLEAR_REQ"}


def _busiest(counters: Mapping[str, Any], table: str, key: str) -> str:
    best = max(((int(c.get(key, 0)), name) for name, c in (counters.get(table) or {}).items()),
               default=(0, ""))
    return f" (most at {best[1]}: {best[0]:,})" if best[0] else ""


def what_happened(results: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(mechanism, sentence)`` for each mechanism the README advertises: what the fabric
    did to the traffic and how the transport answered, from the counters; a mechanism that
    saw nothing says so."""
    s = results["summary"]
    counters = results.get("counters") or {}
    cfg = results["experiment"]["config"]
    topo = cfg["topology"]
    out: list[tuple[str, str]] = []
    retx = dict(s["retransmissions_by_cause"])
    drops = s["drops_by_reason"]
    lost = drops.get("loss", 0) + drops.get("fcs", 0) + drops.get("link_down", 0)
    recovered = {k: v for k, v in retx.items() if not k.startswith("nack.")}
    if s["messages_unfinished"]:
        end = f"{s['messages_unfinished']:,} of {s['flows']:,} messages unfinished"
    elif s["duplicates_delivered"]:
        end = f"{s['duplicates_delivered']:,} duplicates delivered"
    else:
        end = f"all {s['flows']:,} messages delivered exactly once"
    if lost or recovered:
        how = ", ".join(f"{v:,} after {_CAUSES.get(k, k)}" for k, v in recovered.items())
        out.append(("loss recovery", f"{lost:,} frames lost (data, ACKs and control); "
                    f"retransmitted {how or 'nothing'}; {end}"))
    else:
        out.append(("loss recovery", f"no frame lost; {end}"))
    if s["trims"]:
        trimmed = sum(v for k, v in retx.items() if k.startswith("nack.TRIMMED"))
        out.append(("trimming", f"{s['trims']:,} packets cut to their headers at full queues"
                    f"{_busiest(counters, 'port', 'trimmed')}; NACKed, {trimmed:,} "
                    "retransmitted"))
    else:
        out.append(("trimming", "no queue overflowed" if topo["trimming"]
                    else "off (topology.trimming = false)"))
    codes = ", ".join(f"{k} {v:,}" for k, v in s["nacks_by_code"].items())
    out.append(("NACKs", f"{s['nacks']:,} sent" + (f": {codes}" if codes else "")))
    if s["ecn_marks"]:
        out.append(("ECN", f"{s['ecn_marks']:,} packets marked CE"
                    f"{_busiest(counters, 'port', 'ecn_marked')}; senders back off (NSCC) "
                    "and move to other EVs"))
    else:
        out.append(("ECN", "no queue reached ecn_kmin" if topo["ecn"]
                    else "off (topology.ecn = false)"))
    for imp in cfg.get("impairments") or []:
        rate = imp.get("rate_gbps")
        if rate is None and imp.get("rate_factor") is not None:
            rate = imp["rate_factor"] * topo["rate_gbps"]
        if rate is not None:
            what = ", ".join(imp.get("match") or [imp.get("class") or "?"])
            out.append(("degraded link", f"{what} ({imp['direction']}) at {rate:g} of "
                        f"{topo['rate_gbps']:g} Gb/s"))
    if s["pfc_pause_frames"]:
        out.append(("PFC", f"{s['pfc_pause_frames']:,} pause frames, "
                    f"{s['pfc_pause_us']:,.1f} µs paused in all"))
    return out


def summary_table(results: Mapping[str, Any]) -> Table:
    """The headline numbers of one run as a rich table."""
    s = results["summary"]
    run = results["run"]
    exp = results["experiment"]
    tseed = exp.get("traffic_seed", exp["seed"])
    stack = exp["config"]["transport"].get("stack", "uet")
    title = (f"{exp['name']} (seed {exp['seed']}"
             + (f", traffic seed {tseed}" if tseed != exp["seed"] else "")
             + (", RoCEv2" if stack == "roce" else "") + ")")
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("detail", style="dim")

    def section(name: str) -> None:
        table.add_row(f"[bold cyan]{name}", "", "")

    section("run")
    table.add_row("stopped", run["stop_reason"], "all delivered" if run["completed"]
                  else f"{s['messages_unfinished']:,} unfinished")
    table.add_row("virtual time", f"{run['virtual_time_ps'] / 1e6:,.1f} µs",
                  f"wall {run['wall_time_s']:.2f} s")
    last = run.get("last_delivery_ps")
    if last is not None:
        table.add_row("last delivery", f"{last / 1e6:,.1f} µs", "")
    live = run.get("live")
    if live is not None:
        how = "calibrated" if live.get("calibration") else "set"
        behind = live["behind"]
        table.add_row("live (real time)", f"{live['backend']}, 1/{live['dilation']:,.0f}",
                      f"dilation {how}; max lag {behind['max_lag_ps'] / 1e6:,.2f} µs, "
                      f"{behind['late_share']:.1%} late")
    section("messages")
    table.add_row("sent / delivered", f"{s['messages_sent']:,} / {s['messages_delivered']:,}",
                  f"of {s['flows']:,}")
    table.add_row("bytes sent / delivered",
                  f"{s['bytes_sent']:,} / {s['bytes_delivered']:,}", "")
    dups = s["duplicates_delivered"]
    table.add_row("duplicates delivered", f"[red]{dups:,}" if dups else "0",
                  "exactly once" if not dups else "the PDS delivered copies")
    failed = [f for f in results["flows"] if f.get("error")]
    if failed:
        table.add_row("failed messages", f"[red]{len(failed):,}", escape(failed[0]["error"]))
    coll = results.get("collective")
    if coll:
        what = f"{coll['ranks']} ranks"
        if coll["ok"]:
            table.add_row("all-reduce data", "[green]ok", what + ", every byte in place")
        else:
            bad = coll["mismatched_ranks"]
            table.add_row("all-reduce data", "[red]WRONG" if bad else "[yellow]incomplete",
                          what + (f", ranks {bad[:8]} differ" if bad else ""))
    section("flow completion time")
    for label, key in (("min", "min"), ("median", "median"), ("p99", "p99"),
                       ("tail (max)", "max")):
        ratio_key = "fct_tail_over_ideal" if key == "max" else f"fct_{key}_over_ideal"
        table.add_row(f"FCT {label}", f"{_num(s[f'fct_{key}_us'])} µs",
                      f"{_num(s[ratio_key], '.3f')} x ideal")
    table.add_row("largest ideal", f"{_num(s['ideal_max_us'])} µs", "")
    table.add_row("goodput", f"{s['goodput_gbps']:,.1f} Gb/s",
                  f"mean per flow {s['flow_goodput_mean_gbps']:,.1f} Gb/s")
    section("transport")
    table.add_row("retransmissions", _num(s["retransmissions"]),
                  _counts(s["retransmissions_by_cause"]))
    roce = exp["config"]["transport"].get("stack") == "roce"
    table.add_row("NAKs" if roce else "NACKs", _num(s["nacks"]), _counts(s["nacks_by_code"]))
    if roce:
        table.add_row("CNPs", _num(s.get("cnps", 0)), "DCQCN congestion notifications")
    else:
        table.add_row("PDCs opened / closed", f"{s['pdcs_opened']:,} / {s['pdcs_closed']:,}",
                      f"{s['pdcs_closed_in_error']:,} in error" if s["pdcs_closed_in_error"]
                      else "")
    if s.get("victim_flows"):
        table.add_row("victim flow FCT", f"{_num(s['victim_fct_max_us'])} µs",
                      f"{_num(s['victim_fct_max_over_ideal'], '.3f')} x ideal, "
                      f"{s['victim_flows']} victim flow(s)")
    section("fabric")
    table.add_row("trims", _num(s["trims"]), "")
    table.add_row("ECN marks", _num(s["ecn_marks"]), "")
    table.add_row("drops", _num(s["drops"]), _counts(s["drops_by_reason"]))
    table.add_row("PFC pause", f"{s['pfc_pause_us']:,.1f} µs",
                  f"{s['pfc_pause_frames']:,} pause frames")
    table.add_row("wire frames / bytes",
                  f"{s['wire_frames_sent']:,} / {s['wire_bytes_sent']:,}", "")
    return table


def print_summary(results: Mapping[str, Any], console: Console | None = None) -> None:
    """The summary table, then one line per mechanism: what happened."""
    console = console or Console()
    console.print(summary_table(results))
    console.print("[bold]what happened[/bold]")
    for name, sentence in what_happened(results):
        console.print(f"  [cyan]{name:<14}[/cyan] {escape(sentence)}", highlight=False)


def write_outputs(results: dict[str, Any], out_dir: str | Path,
                  series: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write timeseries.json and plots (as ``[output]`` asks) and results.json into
    ``out_dir``; record them in ``results["files"]`` (merged with what the runner put
    there, e.g. captures and the event log). Returns ``results``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    opts = results["experiment"]["config"]["output"]
    files = results.setdefault("files", {})
    plots = bool(opts.get("plots", True))
    # helper processes started with the command draw while this one writes the series
    # (uet.experiments.plot_worker); without them, or if one fails, draw here
    worker = plot_worker.current()
    handed = plots and worker is not None and worker.submit(results, series, out)
    if series and opts.get("timeseries", True):
        (out / "timeseries.json").write_text(timeseries.dumps(series) + "\n",
                                              encoding="utf-8")
        files["timeseries"] = "timeseries.json"
    if plots:
        names = worker.result() if handed and worker is not None else None
        if names is None:
            from uet.experiments.plots import write_plots

            names = write_plots(results, series, out)
        files["plots"] = names
    if worker is not None:
        worker.close()
    write_results(results, out / "results.json")
    return results
