#!/usr/bin/env python3
"""Reads a /metrics exposition on stdin with the reference Python parser (PyPI prometheus-client)
and prints what it understood as JSON: {"families": {name: {"type": t, "samples": [[sample name,
{labels}, value], ...]}}}. Exits 1 with the parser's error when the text does not parse.

Usage: parse_metrics.py prometheus|openmetrics < metrics.txt
"""
import json
import math
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse
from prometheus_client.parser import text_string_to_metric_families as prom_parse


def main():
    fmt = sys.argv[1]
    text = sys.stdin.read()
    parse = om_parse if fmt == "openmetrics" else prom_parse
    out = {}
    try:
        for fam in parse(text):
            samples = []
            for s in fam.samples:
                v = s.value
                samples.append([s.name, s.labels, None if math.isnan(v) else v])
            out[fam.name] = {"type": fam.type, "samples": samples}
    except Exception as e:  # the parser's own message is what the test shows
        print(f"parse error ({fmt}): {e}", file=sys.stderr)
        sys.exit(1)
    json.dump({"families": out}, sys.stdout)


main()
