"""A real SMTP server for tests/api/email.rs: Debian's python3-aiosmtpd
(installed by `make test-deps`) listening on 127.0.0.1.

    smtp_sink.py PORT DIR [--user USER --password PASSWORD] [--fail-first N]

Each message received is written to DIR as NNNN.json: the envelope
(sender, recipients), the user it authenticated as (null without AUTH),
its headers, subject, and its plain-text and HTML parts decoded by
Python's own `email` package (so the test reads what a mail client
shows). With --user, AUTH (PLAIN or LOGIN) is required and checked;
without TLS, as the test speaks plain SMTP to localhost. --fail-first N
answers the first N messages' DATA with a temporary failure (451), for
the retry test. Prints "ready" once it listens.
"""

import argparse
import json
import os
import signal
import sys
import threading
from email import message_from_bytes, policy

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class Sink:
    def __init__(self, directory, fail_first):
        self.directory = directory
        self.fail_first = fail_first
        self.seen = 0
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            self.seen += 1
            if self.seen <= self.fail_first:
                return "451 4.3.0 Try again later (the test's sink fails this one)"
            n = self.seen - self.fail_first
        message = message_from_bytes(envelope.original_content or envelope.content, policy=policy.default)
        plain = message.get_body(("plain",))
        html = message.get_body(("html",))
        login = session.auth_data
        if isinstance(login, LoginPassword):
            login = login.login
        if isinstance(login, bytes):
            login = login.decode()
        record = {
            "mailFrom": envelope.mail_from,
            "rcptTos": envelope.rcpt_tos,
            "authenticatedAs": login if session.authenticated else None,
            "headers": [[k, str(v)] for k, v in message.items()],
            "subject": str(message["subject"]),
            "contentType": message.get_content_type(),
            # Lines as a mail client shows them (SMTP sends CRLF).
            "text": plain.get_content().replace("\r\n", "\n") if plain is not None else None,
            "html": html.get_content().replace("\r\n", "\n") if html is not None else None,
        }
        path = os.path.join(self.directory, f"{n:04d}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(record, f)
        os.rename(path + ".tmp", path)
        return "250 2.0.0 OK"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("dir")
    p.add_argument("--user")
    p.add_argument("--password")
    p.add_argument("--fail-first", type=int, default=0)
    a = p.parse_args()

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login.decode() == a.user
            and auth_data.password.decode() == a.password
        )
        return AuthResult(success=ok, handled=False, auth_data=auth_data if ok else None)

    options = {}
    if a.user is not None:
        options = dict(authenticator=authenticator, auth_required=True, auth_require_tls=False)
    controller = Controller(Sink(a.dir, a.fail_first), hostname="127.0.0.1", port=a.port, **options)
    controller.start()
    print("ready", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    # Also stop when the test process goes away (stdin closes).
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    stop.wait()
    controller.stop()


if __name__ == "__main__":
    main()
