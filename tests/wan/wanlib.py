"""Helpers shared by tests/wan/check and tests/wan/demo: emulated sites (tests/wan/sites) from
Python, with teardown on exit and on SIGINT/SIGTERM, ping and iperf3 across them."""

import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SITES = os.path.join(HERE, "sites")


class Failure(Exception):
    pass


def run(args, check=True, timeout=60, **kw):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise Failure("%s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


class Sites:
    """Two sites joined by protean-wan; `with Sites(tag, ...) as s:` tears down on any exit,
    including SIGINT and SIGTERM (turned into exceptions while the sites are up)."""

    def __init__(self, tag, *opts):
        self.tag = tag
        self.opts = list(opts)
        self.hosts = {}

    def __enter__(self):
        self._old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

        def interrupted(sig, _frame):
            raise KeyboardInterrupt(signal.Signals(sig).name)

        for s in self._old:
            signal.signal(s, interrupted)
        try:
            run([SITES, "up", "--tag", self.tag] + self.opts, env=dict(os.environ, PWAN_QUIET="1"))
            for line in run([SITES, "list", "--tag", self.tag]).stdout.splitlines():
                name, _, site, addr, kind = line.split()
                self.hosts[name] = (site, addr, kind)
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc):
        self.down()
        for s, h in self._old.items():
            signal.signal(s, h)
        return False

    def down(self):
        # Not interruptible: a second Ctrl-C must not leave half the sites behind.
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            subprocess.run([SITES, "down", "--tag", self.tag], env=dict(os.environ, PWAN_QUIET="1"))
        finally:
            signal.signal(signal.SIGINT, old)

    def site_hosts(self, site):
        return [h for h, (s, _, k) in self.hosts.items() if s == site and k != "gw"]

    def wan(self, *opts):
        """Restarts protean-wan with these options."""
        run([SITES, "wan", "--tag", self.tag] + list(opts), env=dict(os.environ, PWAN_QUIET="1"))

    def sockbuf(self, size):
        run([SITES, "sockbuf", "--tag", self.tag, size])

    def exec_args(self, host, *cmd):
        return [SITES, "exec", "--tag", self.tag, host] + list(cmd)

    def exec(self, host, *cmd, **kw):
        return run(self.exec_args(host, *cmd), **kw)

    def wan_log(self, previous=False):
        """protean-wan's output; `previous`: that of the one stopped last (with its counters)."""
        name = "wan.prev.log" if previous else "wan.log"
        try:
            with open("/run/protean-wan/%s/%s" % (self.tag, name)) as f:
                return f.read()
        except OSError:
            return ""

    def ping(self, src, dst, count, interval, wait=2):
        """(transmitted, received, [rtt ms of each reply]); `wait`: seconds to wait for a reply."""
        args = ["ping", "-n", "-c", str(count), "-i", str(interval), "-W", str(wait)]
        r = self.exec(src, *(args + [dst]), check=False, timeout=count * interval + 30)
        m = re.search(r"(\d+) packets transmitted, (\d+) received", r.stdout)
        if not m:
            raise Failure("ping %s -> %s: no summary\n%s%s" % (src, dst, r.stdout, r.stderr))
        rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", r.stdout)]
        return int(m.group(1)), int(m.group(2)), rtts

    def iperf3(self, client, server, *args, seconds=5, tries=3):
        """Runs an iperf3 server on `server` and a client on `client` with `args`; returns the
        client's JSON result."""
        last = ""
        for _ in range(tries):
            srv = subprocess.Popen(self.exec_args(server, "iperf3", "-s", "-1"),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            try:
                time.sleep(0.3)
                r = self.exec(client, "iperf3", "-c", server, "-J", "-t", str(seconds), *args,
                              check=False, timeout=seconds + 60)
                try:
                    out = json.loads(r.stdout)
                except ValueError:
                    out = {"error": r.stdout + r.stderr}
                if "error" not in out:
                    return out
                last = out["error"]
                if "connect" not in last:
                    break
            finally:
                try:
                    srv.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    srv.terminate()
                    srv.wait()
        raise Failure("iperf3 %s -> %s %s: %s" % (client, server, " ".join(args), last))


def received_mbps(result):
    """Throughput the iperf3 receiver saw (TCP), or the UDP receiver's, in Mbit/s."""
    end = result["end"]
    s = end.get("sum_received") or end.get("sum")
    return s["bits_per_second"] / 1e6


def pid_alive(pid):
    """Alive and not a zombie waiting for its reaper."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def leftovers(tag):
    """What sites with `tag` left behind: namespaces, state, /etc/netns entries, protean-wan."""
    found = []
    ns = run(["ip", "netns", "list"]).stdout.split()
    found += ["namespace " + n for n in ns if n.startswith(tag + "-")]
    if os.path.exists("/run/protean-wan/" + tag):
        found.append("/run/protean-wan/" + tag)
    if os.path.isdir("/etc/netns"):
        found += ["/etc/netns/" + n for n in os.listdir("/etc/netns") if n.startswith(tag + "-")]
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    cmd = f.read().split(b"\0")
            except OSError:
                continue
            if cmd and cmd[0].endswith(b"protean-wan") and any(
                    a.startswith(tag.encode() + b"-gw") for a in cmd) and pid_alive(int(p)):
                found.append("protean-wan pid " + p)
    return found


def need_root():
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces)")
