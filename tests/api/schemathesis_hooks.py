"""Schemathesis hooks for tests/api/schemathesis.rs.

docs/openapi.json states three rules that join parameters of a period
(its `info.description`), which the JSON Schema of one parameter cannot
carry: `range=custom` needs both `from` and `to`; `to` must then be after
`from`; and a period has at most 1,500 points at its resolution. The
server refuses a request breaking one with 400 `bad_parameter`, as the
document says (tests/api/json_api.rs checks those answers), so a
schema-valid request may rightly be refused. This hook keeps the positive
(schema-valid) cases to those that keep the rules, so that schemathesis's
`positive_data_acceptance` holds the server to accepting all of them;
negative cases are left as generated.

The operations these rules hold for are read from the document itself:
every operation with a `range` parameter (a list kept by hand missed one).

The fuzzed site is in UTC, so local days are UTC days.
"""

import datetime as dt

import schemathesis

MAX_POINTS = 1500
STEP = {"minute": 60, "hour": 3600, "day": 86400}
# Presets at a resolution finer than their own, with more than 1,500
# points: minute with a week or more (7 * 24 * 60), hour with a year.
TOO_FINE = {
    ("minute", "7d"),
    ("minute", "30d"),
    ("minute", "month"),
    ("minute", "lastmonth"),
    ("minute", "12mo"),
    ("hour", "12mo"),
}


def resolve(document, item):
    """A parameter, or the one its `$ref` names in the same document."""
    ref = item.get("$ref")
    if ref is None:
        return item
    node = document
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def period_operations(document):
    """The paths of the operations that take a `range` query parameter."""
    found = set()
    for path, item in document.get("paths", {}).items():
        shared = item.get("parameters", [])
        for method, operation in item.items():
            if method == "parameters" or not isinstance(operation, dict):
                continue
            for parameter in shared + operation.get("parameters", []):
                parameter = resolve(document, parameter)
                if parameter.get("in") == "query" and parameter.get("name") == "range":
                    found.add(path)
    return found


_PERIOD_OPERATIONS = {}


def is_period_operation(operation):
    """Whether the case's operation takes a period, by the document it was
    generated from (read once per document)."""
    document = operation.schema.raw_schema
    key = id(document)
    if key not in _PERIOD_OPERATIONS:
        _PERIOD_OPERATIONS[key] = period_operations(document)
    return operation.path in _PERIOD_OPERATIONS[key]


def instant(raw, end):
    if len(raw) == len("YYYY-MM-DD"):
        day = dt.datetime.strptime(raw, "%Y-%m-%d")
        # A date as `to` means the whole of that day.
        return day + dt.timedelta(days=1) if end else day
    return dt.datetime.strptime(raw, "%Y-%m-%dT%H:%M")


def auto(span):
    if span <= 6 * 3600:
        return "minute"
    if span <= 10 * 86400:
        return "hour"
    return "day"


def breaks_a_rule(query):
    given = {k: v for k, v in (query or {}).items() if v not in (None, "")}
    range_ = given.get("range", "24h")
    res = given.get("res", "auto")
    if range_ != "custom":
        return (res, range_) in TOO_FINE
    if "from" not in given or "to" not in given:
        return True
    start, end = instant(given["from"], False), instant(given["to"], True)
    if end <= start:
        return True
    if res == "auto":
        res = auto((end - start).total_seconds())
    step = STEP[res]
    epoch = dt.datetime(1970, 1, 1)
    # Every bucket the range touches, from the one `from` falls in.
    first = (start - epoch).total_seconds() // step * step
    points = -(-((end - epoch).total_seconds() - first) // step)
    return points > MAX_POINTS


@schemathesis.hook
def filter_case(context, case):
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return True
    if not is_period_operation(case.operation):
        return True
    return not breaks_a_rule(case.query)
