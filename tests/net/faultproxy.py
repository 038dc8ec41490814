#!/usr/bin/env python3
"""faultproxy.py - a fault-injecting HTTP proxy for the pull tests (loopback only, stdlib).

Forwards GET and HEAD to an upstream server (nginx in tests/cli/test_pull.sh) and misbehaves
on request:
  --drop-after N      close the connection after N body bytes of a response (--drops times)
  --fail K            answer the first K GETs with 503 / 500 alternately
  --stall-after N     after N body bytes stop sending for --stall-s seconds (--stalls times)
  --no-range          ignore Range: always 200 with the whole body, no Accept-Ranges
  --rate BPS          send at most BPS body bytes per second per response
  --hf                act as a Hugging Face mirror: /OWNER/REPO/resolve/REV/PATH is served
                      from upstream /PATH with X-Linked-Etag = the SHA-256 of --root/PATH
                      (or --hf-sha to announce a wrong one) and a redirect hop like the hub
  --require-token T   401 unless "Authorization: Bearer T"
  --corrupt-at N      flip the byte at file offset N in every body sent
  --head-size N       announce N as the Content-Length of a HEAD (the file "changed")
Writes its port to --port-file and the total body bytes it sent to --count-file.
With --config FILE the fault options come from FILE ("--drop-after 700000 --drops 4" on one
line), re-read whenever it changes, which also zeroes the counters and the count file: one
proxy serves every case of a test (python starts slowly on a loaded machine).
"""
import argparse
import hashlib
import http.client
import http.server
import os
import re
import socketserver
import sys
import threading
import time

A = None
PARSER = None
LOCK = threading.Lock()
STATE = {"gets": 0, "drops": 0, "stalls": 0, "sent": 0}


def count(n):
    with LOCK:
        STATE["sent"] += n
        sent = STATE["sent"]
    if A.count_file:
        tmp = A.count_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % sent)
        os.replace(tmp, A.count_file)


def take(key, limit):
    with LOCK:
        if STATE[key] < limit:
            STATE[key] += 1
            return True
    return False


FAULTS = ["drop_after", "drops", "fail", "stall_after", "stall_s", "stalls", "no_range",
          "rate", "hf", "hf_sha", "require_token", "corrupt_at", "head_size"]
CONFIG = {"stamp": None}


def reload_config():
    if not A.config:
        return
    try:
        st = os.stat(A.config)
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        return
    with LOCK:
        if stamp == CONFIG["stamp"]:
            return
        CONFIG["stamp"] = stamp
        args = open(A.config).read().split()
        new = PARSER.parse_args(["--upstream", str(A.upstream), "--port-file", A.port_file] + args)
        for k in FAULTS:
            setattr(A, k, getattr(new, k))
        for k in STATE:
            STATE[k] = 0
    count(0)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def upstream_path(self):
        if not A.hf:
            return self.path, None
        m = re.match(r"^/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$", self.path)
        if not m:
            return None, None
        return "/" + m.group(4), m.group(4)

    def do_HEAD(self):
        self.handle_any(False)

    def do_GET(self):
        self.handle_any(True)

    def error(self, code):
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def handle_any(self, body):
        reload_config()
        if A.require_token and self.headers.get("Authorization") != "Bearer " + A.require_token:
            return self.error(401)
        if A.hf and "/resolve/" in self.path and not self.path.startswith("/cdn"):
            # like the hub: a redirect carrying the LFS object id, then the bytes
            path, rel = self.upstream_path()
            if path is None:
                return self.error(404)
            full = os.path.join(A.root, rel)
            if not os.path.isfile(full):
                return self.error(404)
            sha = A.hf_sha or hashlib.sha256(open(full, "rb").read()).hexdigest()
            self.send_response(302)
            self.send_header("Location", "/cdn" + path)
            self.send_header("X-Linked-Etag", '"%s"' % sha)
            self.send_header("X-Linked-Size", str(os.path.getsize(full)))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = self.path[4:] if self.path.startswith("/cdn") else self.path
        if body:
            with LOCK:
                STATE["gets"] += 1
                n = STATE["gets"]
            if n <= A.fail:
                return self.error(503 if n % 2 else 500)
        headers = {}
        rng = self.headers.get("Range")
        if rng and not A.no_range:
            headers["Range"] = rng
        conn = http.client.HTTPConnection("127.0.0.1", A.upstream, timeout=30)
        conn.request("GET" if body else "HEAD", path, headers=headers)
        r = conn.getresponse()
        self.send_response(r.status)
        start = 0
        for k, v in r.getheaders():
            lk = k.lower()
            if lk in ("connection", "keep-alive", "transfer-encoding", "server", "date"):
                continue
            if A.no_range and lk == "accept-ranges":
                continue
            if lk == "content-length" and not body and A.head_size >= 0:
                v = str(A.head_size)
            if lk == "content-range":
                m = re.match(r"bytes (\d+)-", v)
                start = int(m.group(1)) if m else 0
            self.send_header(k, v)
        self.end_headers()
        if not body:
            r.read()
            conn.close()
            return
        sent = 0
        drop = A.drop_after if A.drop_after >= 0 and take("drops", A.drops) else -1
        stall = A.stall_after if A.stall_after >= 0 and take("stalls", A.stalls) else -1
        t0 = time.time()
        try:
            while True:
                chunk = r.read(16384)
                if not chunk:
                    break
                if A.corrupt_at >= 0 and start + sent <= A.corrupt_at < start + sent + len(chunk):
                    i = A.corrupt_at - start - sent
                    chunk = chunk[:i] + bytes([chunk[i] ^ 0xFF]) + chunk[i + 1:]
                if drop >= 0 and sent + len(chunk) > drop:
                    chunk = chunk[:drop - sent]
                    if chunk:
                        self.wfile.write(chunk)
                        count(len(chunk))
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if stall >= 0 and sent + len(chunk) > stall:
                    time.sleep(A.stall_s)
                    stall = -1
                self.wfile.write(chunk)
                sent += len(chunk)
                count(len(chunk))
                if A.rate:
                    ahead = sent / A.rate - (time.time() - t0)
                    if ahead > 0:
                        time.sleep(ahead)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
        finally:
            conn.close()


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global A, PARSER
    p = PARSER = argparse.ArgumentParser()
    p.add_argument("--upstream", type=int, required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--count-file")
    p.add_argument("--root", default=".")
    p.add_argument("--drop-after", type=int, default=-1)
    p.add_argument("--drops", type=int, default=1 << 30)
    p.add_argument("--fail", type=int, default=0)
    p.add_argument("--stall-after", type=int, default=-1)
    p.add_argument("--stall-s", type=float, default=5)
    p.add_argument("--stalls", type=int, default=1)
    p.add_argument("--no-range", action="store_true")
    p.add_argument("--rate", type=int, default=0)
    p.add_argument("--hf", action="store_true")
    p.add_argument("--hf-sha")
    p.add_argument("--require-token")
    p.add_argument("--corrupt-at", type=int, default=-1)
    p.add_argument("--head-size", type=int, default=-1)
    p.add_argument("--config")
    A = p.parse_args()
    srv = Server(("127.0.0.1", 0), Handler)
    tmp = A.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.replace(tmp, A.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
