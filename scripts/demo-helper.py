#!/usr/bin/env python3
"""Helpers for ./scripts/demo (Python 3 standard library only, so a fresh machine needs no curl
or jq): port checks, the seed's policies split in two files, Envoy bootstraps, bounded waits on
the control planes' APIs, and one request through a sidecar. Every wait is bounded; a failure
prints one line saying what was awaited and exits non-zero.

  ports-free ADDR...                    fail (listing them) when any HOST:PORT is taken
  policies SEED OLD_OUT SHADOW_OUT      Mesh + Timeouts, then the shadow MeshTimeouts
  admin-token URL                       the admin user token a loopback caller may fetch
  bootstrap [--ingress Z|--egress Z] ISSUER ZONE ADS NAME DATAPLANE ADMIN
                                        Envoy bootstrap (YAML) on stdout, as kuma-dp gets it:
                                        a dataplane token (a zone-ingress token, of scope
                                        egress for an egress) from ISSUER (the Global's API),
                                        the CA from ZONE's API, then POST https://ADS/bootstrap
  wait-up URL                           until URL answers 200
  wait-listening HOST:PORT              until a TCP connection to HOST:PORT succeeds
  wait-total URL N [--exact]            until the list at URL has `total` >= N (== N)
  wait-zones API ZONE...                until the Global lists every ZONE online
  wait-acked API NAME...                until every DPP is connected, ACKed, with no NACK
  wait-connected URL                    until the insight at URL (zone proxy+insights) says
                                        connected
  request URL                           until URL answers 200; prints the body
  changed FILE                          the shadow diff's `totals.changed` (fails when absent)
  fingerprint FILE                      a migration plan's `fingerprint` (fails when absent)
  counter ADMIN NAME                    the value of Envoy counter NAME at the admin ADMIN
                                        (HOST:PORT; 0 when absent)

Requests carry `Authorization: Bearer $UMBRA_AUTH_TOKEN` when it is set.

Waits take --timeout SECONDS (default 30) and --watch NAME=PID (repeatable): they fail at once
when a watched process has exited.
"""

import argparse
import base64
import errno
import json
import os
import re
import socket
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def fail(msg):
    sys.stderr.write(f"{msg}\n")
    sys.exit(1)


def request(url, data=None, headers=None, context=None):
    """A urllib request with the user token of $UMBRA_AUTH_TOKEN, if any."""
    headers = dict(headers or {})
    token = os.environ.get("UMBRA_AUTH_TOKEN")
    if token:
        headers["Authorization"] = "Bearer " + token
    return urllib.request.Request(url, data=data, headers=headers)


def http_get(url, timeout=10):
    """(status, text); status 0 when the server cannot be reached."""
    try:
        with urllib.request.urlopen(request(url), timeout=timeout) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (urllib.error.URLError, OSError) as e:
        return 0, str(getattr(e, "reason", e))


def get_json(url):
    status, text = http_get(url)
    if status != 200:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno == errno.EPERM
    # A zombie (exited, not yet reaped) still "exists".
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def wait(args, what, check):
    """Poll check() -> (done, why-not) every 0.2 s; why-not is shown on timeout."""
    watch = []
    for w in args.watch or []:
        name, _, pid = w.partition("=")
        watch.append((name, int(pid)))
    deadline = time.monotonic() + args.timeout
    last = None
    while True:
        ok, last = check()
        if ok:
            return
        for name, pid in watch:
            if not alive(pid):
                fail(f"{name} (pid {pid}) exited while waiting for {what}")
        if time.monotonic() > deadline:
            fail(f"timed out after {args.timeout:g}s waiting for {what}" + (f": {last}" if last else ""))
        time.sleep(0.2)


def cmd_ports_free(args):
    taken = []
    for addr in args.addrs:
        host, _, port = addr.rpartition(":")
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, int(port)))
        except OSError as e:
            taken.append(addr if e.errno == errno.EADDRINUSE else f"{addr} ({e.strerror})")
        finally:
            s.close()
    if taken:
        more = f" and {len(taken) - 4} more" if len(taken) > 5 else ""
        fail(
            "already in use: " + ", ".join(taken[:4] if more else taken) + more + "\n"
            "Is another demo or Umbra running? `ss -ltnp` shows who listens."
        )


def documents(text):
    """Split multi-document YAML on `---` lines, without their leading comments."""
    out = []
    for d in re.split(r"(?m)^---[ \t]*$\n?", text):
        lines = d.splitlines()
        while lines and (not lines[0].strip() or lines[0].lstrip().startswith("#")):
            lines.pop(0)
        if lines:
            out.append("\n".join(lines).rstrip("\n") + "\n")
    return out


def top_field(doc, key):
    m = re.search(rf"(?m)^{key}:\s*['\"]?([^'\"\s#]+)", doc)
    return m.group(1) if m else None


def cmd_policies(args):
    with open(args.seed) as f:
        docs = documents(f.read())
    old, shadow = [], []
    for d in docs:
        kind = top_field(d, "type")
        if kind in ("Mesh", "Timeout"):
            old.append(d)
        elif kind == "MeshTimeout":
            shadow.append(d)
    if not old or not shadow:
        fail(f"{args.seed}: expected a Mesh, Timeouts and MeshTimeouts")
    header = f"# From {args.seed} (transition seed 000, Timeout -> MeshTimeout).\n"
    with open(args.old_out, "w") as f:
        f.write(header + "# The Mesh and the old Timeouts (live).\n" + "---\n".join(old))
    with open(args.shadow_out, "w") as f:
        f.write(header + "# The MeshTimeout replacements, labelled kuma.io/effect: shadow.\n" + "---\n".join(shadow))
    print(f"{len(old)} {len(shadow)}")


def socket_address(addr):
    host, _, port = addr.rpartition(":")
    return {"socketAddress": {"address": host, "portValue": int(port)}}


def post_json(url, body, context=None, timeout=10):
    """(status, text) of a JSON POST."""
    req = request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def cmd_admin_token(args):
    status, text = http_get(args.url.rstrip("/") + "/global-secrets/admin-user-token")
    if status != 200:
        fail(f"admin token: {status} {text.strip()}")
    sys.stdout.write(base64.b64decode(json.loads(text)["data"]).decode() + "\n")


def cmd_bootstrap(args):
    with open(args.dataplane) as f:
        dataplane = f.read()
    if args.ingress or args.egress:
        # A zone ingress or egress: no mesh, a zone-ingress token for its zone (of scope egress
        # for an egress, as kuma-dp --proxy-type=egress is given).
        mesh, name = "", args.name
        proxy_type = "ingress" if args.ingress else "egress"
        body = {"zone": args.ingress or args.egress, "validFor": "24h"}
        if args.egress:
            body["scope"] = ["egress"]
        status, token = post_json(args.issuer.rstrip("/") + "/tokens/zone-ingress", body)
    else:
        mesh, _, name = args.name.partition(".")
        proxy_type = "dataplane"
        status, token = post_json(
            args.issuer.rstrip("/") + "/tokens/dataplane", {"mesh": mesh, "name": name, "validFor": "24h"}
        )
    if status != 200:
        fail(f"{proxy_type} token for {args.name}: {status} {token.strip()}")
    status, ca = http_get(args.zone.rstrip("/") + "/dp-server/ca.pem")
    if status != 200:
        fail(f"data-plane server CA: {status} {ca.strip()}")
    context = ssl.create_default_context(cadata=ca)
    body = {
        "mesh": mesh,
        "name": name,
        "proxyType": proxy_type,
        "adminPort": int(args.admin.rpartition(":")[2]),
        "dataplaneToken": token.strip(),
        "dataplaneResource": dataplane,
        "caCert": ca,
        "version": {"kumaDp": {"version": "umbra-demo"}, "envoy": {"kumaDpCompatible": True}},
    }
    # kuma-dp's call, token in the body; this request carries no user token.
    saved = os.environ.pop("UMBRA_AUTH_TOKEN", None)
    try:
        status, text = post_json(f"https://{args.ads}/bootstrap", body, context=context)
    finally:
        if saved is not None:
            os.environ["UMBRA_AUTH_TOKEN"] = saved
    if status != 200:
        fail(f"POST https://{args.ads}/bootstrap for {args.name}: {status} {text.strip()}")
    sys.stdout.write(base64.b64decode(json.loads(text)["bootstrap"]).decode())


def cmd_wait_up(args):
    def check():
        status, text = http_get(args.url, timeout=2)
        return status == 200, f"{status or 'unreachable'} {text.strip()[:200]}"

    wait(args, f"{args.url} to answer", check)


def cmd_wait_listening(args):
    host, _, port = args.addr.rpartition(":")

    def check():
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
            return True, None
        except OSError as e:
            return False, e.strerror or str(e)

    wait(args, f"{args.addr} to accept connections", check)


def cmd_wait_total(args):
    def check():
        body = get_json(args.url)
        total = body.get("total") if isinstance(body, dict) else None
        enough = isinstance(total, int) and (total == args.n if args.exact else total >= args.n)
        return enough, f"total {total}, want {args.n}"

    wait(args, f"{args.n} item(s) at {args.url}", check)


def cmd_wait_zones(args):
    def check():
        body = get_json(args.api.rstrip("/") + "/zones") or {}
        online = {z.get("name") for z in body.get("items", []) if z.get("online")}
        missing = [z for z in args.zones if z not in online]
        return not missing, "not online: " + ", ".join(missing)

    wait(args, "zones " + ", ".join(args.zones) + " online on the Global", check)


def ack_state(api, name):
    """(ready, why-not)."""
    body = get_json(f"{api.rstrip('/')}/meshes/default/dataplanes+insights/{name}")
    if body is None:
        return False, f"{name}: not registered"
    insight = body.get("dataplaneInsight") or {}
    if not insight.get("connected"):
        return False, f"{name}: not connected"
    nacked = insight.get("nacked") or {}
    if nacked:
        ty, nack = next(iter(nacked.items()))
        return False, f"{name}: Envoy rejected {ty.rsplit('.', 1)[-1]}: {nack.get('error')}"
    acked = insight.get("acked") or {}
    missing = [t for t in ("Cluster", "Listener") if not any(k.endswith(t) for k in acked)]
    if missing:
        return False, f"{name}: no ACK yet for " + ", ".join(missing)
    return True, None


def cmd_wait_acked(args):
    def check():
        for name in args.names:
            ok, why = ack_state(args.api, name)
            if not ok:
                return False, why
        return True, None

    wait(args, "ADS ACKs from " + ", ".join(args.names), check)


def cmd_wait_connected(args):
    def check():
        body = get_json(args.url)
        if not isinstance(body, dict):
            return False, "not registered"
        insight = next((v for k, v in body.items() if k.endswith("Insight") and isinstance(v, dict)), {})
        return bool(insight.get("connected")), "not connected"

    wait(args, f"{args.url} to be connected", check)


def cmd_counter(args):
    """Envoy's admin /stats, filtered to one counter: `NAME: VALUE`."""
    url = f"http://{args.admin}/stats?filter=" + urllib.parse.quote(f"^{re.escape(args.name)}$")
    saved = os.environ.pop("UMBRA_AUTH_TOKEN", None)  # Envoy's admin is not Umbra's API
    try:
        status, text = http_get(url)
    finally:
        if saved is not None:
            os.environ["UMBRA_AUTH_TOKEN"] = saved
    if status != 200:
        fail(f"{url}: {status or 'unreachable'} {text.strip()[:200]}")
    for line in text.splitlines():
        name, _, value = line.partition(": ")
        if name == args.name and value.strip().isdigit():
            print(int(value))
            return
    print(0)


def cmd_request(args):
    result = {}

    def check():
        status, text = http_get(args.url, timeout=5)
        result["body"] = text
        return status == 200, f"{status or 'unreachable'} {text.strip()}"

    wait(args, f"a 200 from {args.url}", check)
    print(result["body"].strip())


def cmd_traffic(args):
    """GET the URL every --interval seconds until killed, printing each status: the traffic a
    staged rollout's gate reads from the Envoys' counters."""
    while True:
        status, _ = http_get(args.url, timeout=2)
        print(status, flush=True)
        time.sleep(args.interval)


def cmd_changed(args):
    try:
        with open(args.file) as f:
            body = json.load(f)
        print(int(body["totals"]["changed"]))
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{args.file}: no totals.changed in the shadow diff ({e})")


def cmd_fingerprint(args):
    try:
        with open(args.file, encoding="utf-8") as f:
            print(json.load(f)["fingerprint"])
    except (OSError, ValueError, KeyError) as e:
        fail(f"{args.file}: no fingerprint in the migration plan ({e})")


def cmd_console(args):
    """Sign in to the console with $UMBRA_AUTH_TOKEN (as a browser does) and check that every
    page in args.pages answers 200 with its marker (`path|marker`), without following
    redirects: a page that sends the browser to sign in fails."""
    token = os.environ.get("UMBRA_AUTH_TOKEN", "")
    form = urllib.parse.urlencode({"token": token, "next": "/gui/zones"}).encode()

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        opener.open(urllib.request.Request(args.url + "/gui/login", data=form), timeout=10)
        fail("console sign-in did not redirect")
    except urllib.error.HTTPError as e:
        if e.code != 303:
            fail(f"console sign-in answered {e.code}: {e.read().decode(errors='replace')[:300]}")
        cookie = (e.headers.get("Set-Cookie") or "").split(";")[0]
    if not cookie.startswith("umbra_console_token"):
        fail("console sign-in set no session cookie")
    for page in args.pages:
        path, marker = page.split("|", 1)
        req = urllib.request.Request(args.url + path, headers={"Cookie": cookie})
        # No redirect is followed: a page that sends the browser to sign in is a failure,
        # not the sign-in form's 200.
        try:
            with opener.open(req, timeout=60) as resp:
                text = resp.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            location = e.headers.get("Location") or ""
            if e.code in (301, 302, 303, 307, 308) and location.startswith("/gui/login"):
                fail(f"console {path}: not signed in (redirected to sign-in)")
            body = e.read().decode(errors="replace")[:300]
            where = f" to {location}" if location else ""
            fail(f"console {path}: {e.code}{where}: {body}")
        if marker not in text:
            fail(f"console {path}: no {marker!r} in the page")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    def waiting(sp):
        sp.add_argument("--timeout", type=float, default=30)
        sp.add_argument("--watch", action="append", metavar="NAME=PID")
        return sp

    s = sub.add_parser("ports-free")
    s.add_argument("addrs", nargs="+")
    s.set_defaults(fn=cmd_ports_free)
    s = sub.add_parser("policies")
    s.add_argument("seed")
    s.add_argument("old_out")
    s.add_argument("shadow_out")
    s.set_defaults(fn=cmd_policies)
    s = sub.add_parser("traffic")
    s.add_argument("url")
    s.add_argument("--interval", type=float, default=0.1)
    s.set_defaults(fn=cmd_traffic)
    s = sub.add_parser("console")
    s.add_argument("url")
    s.add_argument("pages", nargs="+", metavar="PATH|MARKER")
    s.set_defaults(fn=cmd_console)
    s = sub.add_parser("admin-token")
    s.add_argument("url")
    s.set_defaults(fn=cmd_admin_token)
    s = sub.add_parser("bootstrap")
    kind = s.add_mutually_exclusive_group()
    kind.add_argument("--ingress", metavar="ZONE", help="bootstrap the ZoneIngress NAME of ZONE")
    kind.add_argument("--egress", metavar="ZONE", help="bootstrap the ZoneEgress NAME of ZONE")
    s.add_argument("issuer")
    s.add_argument("zone")
    s.add_argument("ads")
    s.add_argument("name")
    s.add_argument("dataplane")
    s.add_argument("admin")
    s.set_defaults(fn=cmd_bootstrap)
    s = waiting(sub.add_parser("wait-up"))
    s.add_argument("url")
    s.set_defaults(fn=cmd_wait_up)
    s = waiting(sub.add_parser("wait-listening"))
    s.add_argument("addr")
    s.set_defaults(fn=cmd_wait_listening)
    s = waiting(sub.add_parser("wait-total"))
    s.add_argument("url")
    s.add_argument("n", type=int)
    s.add_argument("--exact", action="store_true")
    s.set_defaults(fn=cmd_wait_total)
    s = waiting(sub.add_parser("wait-zones"))
    s.add_argument("api")
    s.add_argument("zones", nargs="+")
    s.set_defaults(fn=cmd_wait_zones)
    s = waiting(sub.add_parser("wait-acked"))
    s.add_argument("api")
    s.add_argument("names", nargs="+")
    s.set_defaults(fn=cmd_wait_acked)
    s = waiting(sub.add_parser("wait-connected"))
    s.add_argument("url")
    s.set_defaults(fn=cmd_wait_connected)
    s = sub.add_parser("counter")
    s.add_argument("admin")
    s.add_argument("name")
    s.set_defaults(fn=cmd_counter)
    s = waiting(sub.add_parser("request"))
    s.add_argument("url")
    s.set_defaults(fn=cmd_request)
    s = sub.add_parser("changed")
    s.add_argument("file")
    s.set_defaults(fn=cmd_changed)
    s = sub.add_parser("fingerprint")
    s.add_argument("file")
    s.set_defaults(fn=cmd_fingerprint)
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
