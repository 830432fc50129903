"""Reading an Ember Chrome-trace profile (ENGINE_PROFILE, ember-train
--trace) for the scripts beside this file: the row names and the spans."""
import json


def load(path):
    """Returns ({(pid, tid): row name}, [complete spans ("ph": "X")])."""
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {(e["pid"], e["tid"]): e["args"]["name"]
             for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    return names, spans
