# docs/hardening.md: a bounded slowloris + scrape flood against `joinguard monitor`: 500 connections that send a request head
# one byte every 2 s (re-opened when closed) and 8 threads scraping /metrics back to back, for
# DURATION seconds (argv 1; argv 2: connections). Prints counts. Run it from a netlab host;
# HOST is the monitor in the lab's `joiner` (198.18.0.1), never a host outside the lab.
import socket, threading, time, sys, urllib.request
HOST, PORT = "198.18.0.1", 9810
DURATION = float(sys.argv[1]) if len(sys.argv) > 1 else 60
N = int(sys.argv[2]) if len(sys.argv) > 2 else 500
end = time.time() + DURATION
stats = {"opened": 0, "closed_by_server": 0, "refused": 0, "scrapes": 0, "scrape_errors": 0}
lock = threading.Lock()
def bump(k):
    with lock: stats[k] += 1
def slow(i):
    s = None
    while time.time() < end:
        if s is None:
            try:
                s = socket.create_connection((HOST, PORT), timeout=3)
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                bump("opened")
            except OSError:
                bump("refused"); s = None; time.sleep(0.5); continue
        time.sleep(2)
        try:
            s.sendall(b"X")
            s.settimeout(0.01)
            try:
                if s.recv(1) == b"":
                    raise OSError("closed")
            except socket.timeout:
                pass
        except OSError:
            bump("closed_by_server"); s.close(); s = None
    if s: s.close()
def flood():
    while time.time() < end:
        try:
            urllib.request.urlopen(f"http://{HOST}:{PORT}/metrics", timeout=2).read()
            bump("scrapes")
        except Exception:
            bump("scrape_errors"); time.sleep(0.05)
ts = [threading.Thread(target=slow, args=(i,)) for i in range(N)] + [threading.Thread(target=flood) for _ in range(8)]
for t in ts: t.start()
for t in ts: t.join()
print(stats)
