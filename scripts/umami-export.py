#!/usr/bin/env python3
# Usage: scripts/umami-export.py ROWS DIR (docs/benchmarks.md, "Umami: a million rows").
# A year of Umami rows (website_event.csv, session.csv) for the import
# speed measurement: N events in time order over 365 days, 1,000 pages
# (Zipf), sessions of 1-6 views, ~1% custom events.
import bisect, csv, datetime, random, sys, uuid
N = int(sys.argv[1]); out = sys.argv[2]
WEBSITE = "94db1cb1-74f4-4a40-ad6c-962362670409"
rnd = random.Random(7)
weights = [1.0 / (k + 1) for k in range(1000)]
cum = []; acc = 0
for w in weights: acc += w; cum.append(acc)
def page(): return "/p/%d" % (bisect.bisect(cum, rnd.random() * acc) + 1)
end = datetime.datetime(2026, 11, 25, tzinfo=datetime.timezone.utc)
start = end - datetime.timedelta(days=365)
span = (end - start).total_seconds()
# A session's views are `step` apart: at most a row's share of the year, so
# its last view comes before the next session's first and the file stays
# in time order (the README's export is `ORDER BY created_at`) at any N.
step = min(5.0, span / N)
HEADER = "event_id,website_id,session_id,visit_id,created_at,url_path,url_query,utm_source,utm_medium,utm_campaign,utm_content,utm_term,referrer_path,referrer_query,referrer_domain,page_title,gclid,fbclid,msclkid,ttclid,li_fat_id,twclid,event_type,event_name,tag,hostname".split(",")
refs = ["", "", "google.com", "news.ycombinator.com", "duckduckgo.com", "github.com"]
browsers = ["chrome", "firefox", "safari", "edge-chromium", "ios", "crios"]
oses = ["Windows 10", "Mac OS", "Linux", "iOS", "Android OS"]
devices = ["desktop", "laptop", "mobile", "tablet"]
countries = ["DE", "US", "FR", "NL", "GB", "JP", ""]
views = events = 0
sessions = []
with open(out + "/website_event.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(HEADER)
    i = 0
    while i < N:
        t = start + datetime.timedelta(seconds=span * i / N)
        s = str(uuid.UUID(int=rnd.getrandbits(128), version=4)); v = str(uuid.UUID(int=rnd.getrandbits(128), version=4))
        sessions.append(s)
        ref = rnd.choice(refs)
        for k in range(rnd.randint(1, 6)):
            if i >= N: break
            at = (t + datetime.timedelta(seconds=step * k)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "+00"
            kind, name = (2, "Signup") if rnd.random() < 0.01 else (1, "")
            if kind == 1: views += 1
            else: events += 1
            w.writerow([str(uuid.UUID(int=rnd.getrandbits(128), version=4)), WEBSITE, s, v, at, page(), "", "", "", "", "", "", "", "", ref if k == 0 else "", "A title", "", "", "", "", "", "", kind, name, "", "example.com"])
            i += 1
with open(out + "/session.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["session_id", "browser", "os", "device", "country"])
    for s in sessions:
        w.writerow([s, rnd.choice(browsers), rnd.choice(oses), rnd.choice(devices), rnd.choice(countries)])
print("rows", N, "views", views, "events", events, "sessions", len(sessions))
