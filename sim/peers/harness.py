"""What the peer-client scripts share: a check recorder and a few helpers.

Each script runs its checks in order. A check is a function that raises (an AssertionError or
whatever the client raised) when the sim answered what the real service would not. A known
divergence is a check that asserts the sim still answers the way the README's gap list says: it
fails as soon as that changes, so the gap list is kept true.

The last line a script prints is `peer-clients SUITE passed=N differ=M failed=K`, read by
sim/tests/peer_clients.rs; the script exits 1 if any check failed.
"""

import json
import os
import sys
import time
import traceback
import urllib.request


class Suite:
    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.differ = 0
        self.failed = []

    def check(self, title, fn, *args):
        """Runs one check; returns what it returned (None if it failed)."""
        try:
            out = fn(*args)
        except Exception:  # noqa: BLE001 - every failure is reported, the suite goes on
            self.failed.append(title)
            print(f"FAIL {self.name}: {title}\n{traceback.format_exc()}", flush=True)
            return None
        self.passed += 1
        print(f"ok   {self.name}: {title}", flush=True)
        return out

    def known_divergence(self, title, gap, fn, *args):
        """A divergence written down in sim/README.md (`gap` names it): `fn` asserts it still holds."""
        try:
            fn(*args)
        except Exception:  # noqa: BLE001
            self.failed.append(title)
            print(
                f"FAIL {self.name}: {title}: the known divergence '{gap}' no longer holds; "
                f"update sim/README.md's gap list and this check\n{traceback.format_exc()}",
                flush=True,
            )
            return
        self.differ += 1
        print(f"diff {self.name}: {title} (known: {gap})", flush=True)

    def finish(self):
        print(
            f"peer-clients {self.name} passed={self.passed} differ={self.differ} failed={len(self.failed)}",
            flush=True,
        )
        sys.exit(1 if self.failed else 0)


def sim_url():
    url = os.environ.get("XCSP_SIM_URL")
    if not url:
        sys.exit("XCSP_SIM_URL is not set (sim/tests/peer_clients.rs sets it to the sim it started)")
    return url.rstrip("/")


def admin(path, method="GET", body=None):
    """The sim's admin API (`/_sim/...`, plain http, no token)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{sim_url()}/_sim/{path}", data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as r:
        text = r.read().decode()
    return json.loads(text) if text.strip().startswith(("{", "[")) else text


def wait_for(what, fn, timeout=60.0, every=0.2):
    """Polls fn until it returns something truthy; fails naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        out = fn()
        if out:
            return out
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every)


def raises(exc_type, fn, *args, **kwargs):
    """Calls fn, which must raise exc_type; returns the exception."""
    try:
        fn(*args, **kwargs)
    except exc_type as e:
        return e
    raise AssertionError(f"{getattr(fn, '__name__', fn)} did not raise {exc_type.__name__}")


def reference_dir():
    """The reference set: $XCSP_REFERENCE_DIR, else ../shared/reference beside the checkout."""
    env = os.environ.get("XCSP_REFERENCE_DIR")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    d = env or os.path.join(os.path.dirname(repo), "shared", "reference")
    if not os.path.isdir(os.path.join(d, "crds")):
        sys.exit(
            f"the reference set is missing: no crds/ in {d} (set XCSP_REFERENCE_DIR or put shared/reference "
            "beside the checkout); the peer-client suite validates against it and does not skip"
        )
    return d
