"""A customer service the enrichment job calls: it answers at once, except that every Nth request stalls past the
job's read timeout (a slow dependency that recovers on its own)."""
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, EVERY = int(sys.argv[1]), int(sys.argv[2])
count = 0


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        global count
        count += 1
        if count % EVERY == 0:
            time.sleep(2)
        body = b"gold"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
