#!/usr/bin/env python3
"""bench/summary.py RESULTS.tsv MD JSON - the summary table of make bench.

RESULTS.tsv holds one line per comparison (bench/lib.sh's result and
peer_missing): bench, what, pisb, peer label, peer value, unit, goal.
Comparisons of the same `what` are one row: pisb's figure, the best peer
(the fastest; for MB/s and % the highest), the ratio pisb/best peer, the
goal and whether it was met, and the other peers.  The table goes to
stdout and to MD (markdown); every figure, with all peers, to JSON.
A missed goal is reported here, never a failure.
"""
import json
import sys

HIGHER = {"MB/s", "%"}


def num(s):
    try:
        v = float(s)
    except ValueError:
        return None
    return v if v == v else None  # NaN: the measurement failed


def fmt(v, unit):
    if v is None:
        return "failed"
    if unit in ("KiB", "count", "%"):
        return f"{v:,.0f} {unit}" if unit != "count" else f"{v:,.0f}"
    if unit == "x":
        return f"{v:.2f}x"
    if unit == "ms":
        return f"{v:.2f} ms" if v < 100 else f"{v:,.0f} ms"
    return f"{v:,.1f} {unit}"


def met(goal, pisb, ratio, has_peer):
    """(text, met) of a goal: on the ratio pisb/peer when there is a peer
    ("<= 2" reads "at most 2x the peer"), else on pisb's own figure"""
    if not goal:
        return "", None
    for op in ("<=", ">=", "<", ">"):
        if goal.startswith(op):
            lim = float(goal[len(op):])
            break
    else:
        return goal, None
    ratio_goal = has_peer
    x = ratio if ratio_goal else pisb
    if x is None:
        return goal, False
    ok = {"<=": x <= lim, ">=": x >= lim, "<": x < lim, ">": x > lim}[op]
    return (f"{op} {lim:g}x" if ratio_goal else f"{op} {lim:g}"), ok


def main():
    tsv, md_path, json_path = sys.argv[1:4]
    rows = {}
    order = []
    with open(tsv, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 7:
                continue
            bench, what, pisb, peer, peer_v, unit, goal = parts[:7]
            key = (bench, what)
            if key not in rows:
                rows[key] = {"bench": bench, "what": what, "pisb": None, "unit": unit,
                             "peers": [], "goal": "", "goal_peer": None}
                order.append(key)
            r = rows[key]
            if unit != "-":
                r["unit"] = unit
                if num(pisb) is not None:
                    r["pisb"] = num(pisb)
            if peer in ("", "-"):
                if goal and not r["goal"]:
                    r["goal"] = goal
                continue
            if unit == "-":
                r["peers"].append({"peer": peer, "value": None, "note": goal})
            else:
                r["peers"].append({"peer": peer, "value": num(peer_v), "note": ""})
                if goal and not r["goal"]:
                    r["goal"], r["goal_peer"] = goal, peer
    out = []
    table = ["| what | pisb | best peer | ratio | goal | met | other peers |",
             "|---|---|---|---|---|---|---|"]
    for key in order:
        r = rows[key]
        unit = r["unit"]
        higher = unit in HIGHER
        measured = [p for p in r["peers"] if p["value"] is not None and p["value"] > 0]
        for p in measured:
            p["ratio"] = r["pisb"] / p["value"] if r["pisb"] is not None else None
        best = None
        if measured:
            best = (max if higher else min)(measured, key=lambda p: p["value"])
        # a ratio goal is about the peer it was given against
        gp = next((p for p in measured if p["peer"] == r["goal_peer"]), best)
        gtext, ok = met(r["goal"], r["pisb"], gp.get("ratio") if gp else None,
                        bool(r["goal_peer"] or measured))
        if gtext and r["goal_peer"] and gp is not best and gp is not None:
            gtext += f" {gp['peer']}"
        others = []
        for p in r["peers"]:
            if p is best:
                continue
            if p["value"] is None:
                others.append(f"{p['peer']}: {p['note'][:70]}")
            else:
                ratio = f" ({p['ratio']:.2f}x)" if p.get("ratio") is not None else ""
                others.append(f"{p['peer']} {fmt(p['value'], unit)}{ratio}")
        ratio = f"{best['ratio']:.2f}x" if best and best.get("ratio") is not None else "-"
        table.append("| {} | {} | {} | {} | {} | {} | {} |".format(
            r["what"].replace("|", "\\|"), fmt(r["pisb"], unit),
            f"{best['peer']} {fmt(best['value'], unit)}".replace("|", "\\|") if best else "-",
            ratio, gtext or "-", {True: "yes", False: "**no**", None: "-"}[ok],
            "; ".join(others).replace("|", "\\|") or "-"))
        out.append({"bench": r["bench"], "what": r["what"], "pisb": r["pisb"], "unit": unit,
                    "bestPeer": best["peer"] if best else None,
                    "ratio": best.get("ratio") if best else None,
                    "goal": r["goal"] or None, "met": ok, "peers": r["peers"]})
    text = "\n".join(table) + "\n"
    sys.stdout.write(text)
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(text)
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
