"""A real SMTP server for tests/api/email.rs: Debian's python3-aiosmtpd
(installed by `make test-deps`) listening on 127.0.0.1.

    smtp_sink.py PORT DIR [--user USER --password PASSWORD] [--fail-first N]
                 [--tls starttls|implicit --cert PEM --key PEM]

Each message received is written to DIR as NNNN.json: the envelope
(sender, recipients), the user it authenticated as (null without AUTH),
its headers, subject, the TLS version its connection used (null for
plain SMTP), and its plain-text and HTML parts decoded by Python's own
`email` package (so the test reads what a mail client shows). Each AUTH
attempt, right or wrong, is a line of DIR/auth-attempts.jsonl with the
TLS version it came over (so a test sees a password never sent in the
clear). With --user, AUTH (PLAIN or LOGIN) is required and checked.
--fail-first N answers the first N messages' DATA with a temporary
failure (451), for the retry test.

TLS, with the certificate and key given (PEM):
- --tls starttls offers STARTTLS and requires it: nothing but EHLO,
  STARTTLS, NOOP and QUIT before it, and AUTH only after it;
- --tls implicit speaks TLS from the first byte (smtps://).
Without --tls, plain SMTP with AUTH allowed in the clear (localhost).

Prints "ready" once it listens.
"""

import argparse
import json
import os
import signal
import ssl
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
            "tls": tls_version(server),
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


def tls_version(server):
    """The TLS version of the connection `server` speaks on, or None: the
    transport after STARTTLS, or from the start with implicit TLS, has an
    ssl_object."""
    ssl_object = server.transport.get_extra_info("ssl_object") if server.transport else None
    return ssl_object.version() if ssl_object is not None else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("dir")
    p.add_argument("--user")
    p.add_argument("--password")
    p.add_argument("--fail-first", type=int, default=0)
    p.add_argument("--tls", choices=["starttls", "implicit"])
    p.add_argument("--cert")
    p.add_argument("--key")
    a = p.parse_args()
    attempts = os.path.join(a.dir, "auth-attempts.jsonl")
    attempts_lock = threading.Lock()

    def authenticator(server, session, envelope, mechanism, auth_data):
        with attempts_lock, open(attempts, "a") as f:
            f.write(json.dumps({"mechanism": mechanism, "tls": tls_version(server)}) + "\n")
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login.decode() == a.user
            and auth_data.password.decode() == a.password
        )
        return AuthResult(success=ok, handled=False, auth_data=auth_data if ok else None)

    options = {}
    if a.tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(a.cert, a.key)
        if a.tls == "starttls":
            options.update(tls_context=context, require_starttls=True)
        else:
            options.update(ssl_context=context)
    if a.user is not None:
        # AUTH only under STARTTLS when it is offered; with implicit TLS
        # aiosmtpd knows no STARTTLS was done and would refuse it, though
        # the whole connection is TLS.
        options.update(
            authenticator=authenticator,
            auth_required=True,
            auth_require_tls=a.tls == "starttls",
        )
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
