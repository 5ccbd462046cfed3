"""Quick start: a change-feed receiver that checks each delivery's signature.

    WEBHOOK_SECRET=whsec_... python docs/examples/webhook_receiver.py 8765

Add http://<this host>:8765/ as a receiver on the console's Change feed page; the
secret is shown there once. With ``--once`` it exits after the first delivery.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from memoryadmin_client.webhooks import SIGNATURE_HEADER, verify

SECRET = os.environ["WEBHOOK_SECRET"]
seen: set[str] = set()


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not verify(SECRET, self.headers.get(SIGNATURE_HEADER, ""), body):
            self.send_response(400)
            self.end_headers()
            print("rejected: bad or old signature", flush=True)
            return
        event = json.loads(body)
        if event["id"] not in seen:  # deliveries come at least once
            seen.add(event["id"])
            print(f"verified {event['type']} in {event['project']}: {json.dumps(event['data'])}", flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


server = HTTPServer(("127.0.0.1", int(sys.argv[1])), Receiver)
print("listening", flush=True)
if "--once" in sys.argv:
    server.handle_request()
else:
    server.serve_forever()
