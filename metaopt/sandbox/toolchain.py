"""A static toolchain the runner brings into a container at verify time.

The runner's own steps inside a container (stopping the agent's processes, removing and
recreating the verifier's directories, deleting caches, the timeout wrapper around the verifier)
must not run anything the agent could have replaced: not its PATH, not its /bin/sh, not its
dynamic loader. So they run under a statically linked busybox (Debian's `busybox-static`,
installed on the host by scripts/setup.sh), copied in through the Docker API at a fresh random
path just before the verifier and invoked by absolute path, with PATH set to its own applet
links. A static binary ignores LD_PRELOAD and /etc/ld.so.preload.

`METAOPT_BUSYBOX` names another static busybox on the host. A missing or dynamically linked one
is a setup error (`ToolchainMissing`, systemic: the run stops with one line).
"""

from __future__ import annotations

import hashlib
import io
import os
import secrets
import struct
import tarfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metaopt.core.errors import SandboxError, ToolchainMissing
from metaopt.sandbox.base import ExecResult

if TYPE_CHECKING:
    from metaopt.sandbox.docker_sandbox import DockerSandbox

CANDIDATES = ("/bin/busybox", "/usr/bin/busybox", "/usr/local/bin/busybox")
APPLETS = ("sh", "rm", "mkdir", "kill", "cat", "ls", "sleep", "readlink", "awk", "sort", "tr",
           "cut", "head", "grep", "xargs", "env", "true", "printf", "echo", "test", "timeout",
           "chmod", "stat", "wc", "uniq", "tail", "sed")
APT_OFFLINE = 'Acquire::Retries "0";\n'
"""apt config for containers without network: fail at once instead of retrying (~7 s per
`apt-get update` otherwise). Handed to the verifier through APT_CONFIG."""


def host_busybox() -> Path:
    """The host's static busybox. Raises ToolchainMissing naming what to install."""
    env = os.environ.get("METAOPT_BUSYBOX")
    for cand in ([env] if env else list(CANDIDATES)):
        p = Path(cand)
        if p.is_file():
            if not is_static_elf(p):
                raise ToolchainMissing(f"{p} is not a statically linked executable: install "
                                       f"busybox-static (apt-get install busybox-static) or set METAOPT_BUSYBOX")
            return p
    raise ToolchainMissing("no static busybox on this machine: the verifier's runner steps need one "
                           "(apt-get install busybox-static, or bash scripts/setup.sh; METAOPT_BUSYBOX overrides)")


@lru_cache(maxsize=8)
def _read(path: str) -> bytes:
    return Path(path).read_bytes()


def is_static_elf(path: Path) -> bool:
    """An ELF executable without a program interpreter (PT_INTERP), i.e. statically linked."""
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit only
            return False
        end = "<" if head[5] == 1 else ">"
        phoff, = struct.unpack(end + "Q", head[32:40])
        phentsize, phnum = struct.unpack(end + "HH", head[54:58])
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return all(struct.unpack(end + "I", table[i:i + 4])[0] != 3 for i in range(0, len(table), phentsize))


# Kill what the agent left running. Spared: PID 1 (the container's init), the container's main
# process (the oldest child of PID 1), this script, the toolchain's own processes (their command
# line starts with its random root, $2), and in `listeners` mode every
# process holding a listening socket (TCP LISTEN, bound UDP, listening unix socket) together with
# its descendants: the services a task asked for. Everything else is SIGSTOPped until nothing new
# appears (a stopped process cannot fork), then SIGKILLed; a few rounds catch stragglers.
# Output: "kept PID UID CMDLINE" lines, "victim PID CMDLINE" lines (at most 20 a round), then
# "killed N", then "left PIDS" (processes that survived SIGKILL, e.g. in uninterruptible sleep).
STOP = r"""
mode=$1; root=$2; self=$$; wrap=$PPID
procs() { for f in /proc/[0-9]*/stat; do read -r l < "$f" 2>/dev/null || continue
  r=${l##*) }; set -- $r; echo "${l%% *} $2 $1"; done; }
main=$(procs | awk '$2 == 1 { print $1 }' | sort -n | head -n 1)
keep=" 1 $main $self $wrap "
if [ "$mode" = listeners ]; then
  inodes=$( { awk 'NR > 1 && $4 == "0A" { print $10 }' /proc/net/tcp /proc/net/tcp6
              awk 'NR > 1 && $4 == "07" { split($2, a, ":"); if (a[2] != "0000") print $10 }' /proc/net/udp /proc/net/udp6
              awk 'NR > 1 && $4 == "00010000" { print $7 }' /proc/net/unix; } 2>/dev/null | sort -u | tr '\n' ' ')
  roots=" "
  if [ -n "$inodes" ]; then
    for d in /proc/[0-9]*; do p=${d#/proc/}
      case "$keep" in *" $p "*) continue ;; esac
      for fd in "$d"/fd/*; do l=$(readlink "$fd" 2>/dev/null) || continue
        case "$l" in "socket:["*"]") i=${l#socket:[}; i=${i%]}
          case " $inodes " in *" $i "*) roots="$roots$p "; break ;; esac ;; esac
      done
    done
  fi
  if [ "$roots" != " " ]; then  # listeners and their descendants
    tree=$(procs | awk -v r="$roots" 'BEGIN { n = split(r, a, " "); for (i = 1; i <= n; i++) k[a[i]] = 1 }
      { pp[$1] = $2 } END { do { g = 0; for (p in pp) if (!(p in k) && (pp[p] in k)) { k[p] = 1; g = 1 } } while (g)
      for (p in k) printf "%s ", p }')
    for p in $tree; do
      u=$(awk '$1 == "Uid:" { print $2 }' /proc/$p/status 2>/dev/null)
      c=$(tr '\0\n' '  ' < /proc/$p/cmdline 2>/dev/null | cut -c1-400)
      [ -n "$u" ] && echo "kept $p $u $c"
    done
    keep="$keep$tree "
  fi
fi
mine=$(for d in /proc/[0-9]*; do read -r c < "$d/cmdline" 2>/dev/null; case "$c" in "$root/"*) printf '%s ' "${d#/proc/}" ;; esac; done)
keep="$keep$mine "
victims() { procs | awk -v k="$keep" -v me="$self" 'BEGIN { n = split(k, a, " "); for (i = 1; i <= n; i++) s[a[i]] = 1 }
  { pp[$1] = $2; st[$1] = $3 } END { m[me] = 1; do { g = 0; for (p in pp) if (!(p in m) && (pp[p] in m)) { m[p] = 1; g = 1 } } while (g)
  for (p in pp) if (st[p] != "Z" && !(p in s) && !(p in m)) printf "%s ", p }'; }
killed=0; round=0
while [ $round -lt 5 ]; do
  v=$(victims); [ -z "$v" ] && break
  for p in $v; do c=$(tr '\0\n' '  ' < /proc/$p/cmdline 2>/dev/null | cut -c1-120); echo "victim $p $c"; done | head -n 20
  prev=; n=0
  while [ "$v" != "$prev" ] && [ $n -lt 20 ]; do kill -STOP $v 2>/dev/null; prev=$v; v=$(victims); n=$((n+1)); done
  kill -KILL $v 2>/dev/null; set -- $v; killed=$((killed + $#)); round=$((round + 1)); sleep 0.1
done
echo "killed $killed"
echo "left $(victims)"
"""

# Process facts for PID 1 and the main process: a process of the agent's could have ptraced
# code into them (they are spared by STOP). Compared with the same facts taken when the
# container started.
PROC_FACTS = r"""
main=$(for f in /proc/[0-9]*/stat; do read -r l < "$f" 2>/dev/null || continue; r=${l##*) }; set -- $r
  [ "$2" = 1 ] && echo "${l%% *}"; done | sort -n | head -n 1)
for p in 1 $main; do
  printf '%s|%s|%s|%s|%s\n' "$p" "$(tr '\0' ' ' < /proc/$p/cmdline)" \
    "$(awk '$1 ~ /^(Threads|TracerPid|SigCgt|SigIgn|SigBlk):$/ { printf "%s%s ", $1, $2 }' /proc/$p/status)" \
    "$(cut -d' ' -f1 /proc/$p/syscall 2>/dev/null)" "$(readlink /proc/$p/exe)"
done
"""


@dataclass
class StopReport:
    """What stop_agent_processes did: services kept (pid, uid, cmdline), how many processes were
    killed, pids that outlived SIGKILL."""

    kept: list[dict[str, Any]] = field(default_factory=list)
    victims: list[str] = field(default_factory=list)
    killed: int = 0
    left: list[int] = field(default_factory=list)


class Toolchain:
    """A static busybox installed in one sandbox at `root` (a fresh random directory)."""

    def __init__(self, sb: DockerSandbox, root: str, digest: str):
        self.sb, self.root, self.digest = sb, root, digest
        self.busybox = f"{root}/busybox"
        self.bin = f"{root}/bin"

    @classmethod
    def install(cls, sb: Any, root: str | None = None) -> Toolchain:
        """Copy the host's busybox into `sb` (DockerSandbox; created or running) at `root`
        (default /.metaopt-<random>/) and route the sandbox's own exec wrappers (timeout pid
        file, kill tree) through it."""
        data = _read(str(host_busybox()))
        root = root or new_root()
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            _add(tar, root, tarfile.DIRTYPE, 0o755)
            _add(tar, f"{root}/bin", tarfile.DIRTYPE, 0o755)
            _add(tar, f"{root}/run", tarfile.DIRTYPE, 0o1777)  # pid files of the timeout wrapper, any user
            _add(tar, f"{root}/busybox", tarfile.REGTYPE, 0o755, data)
            _add(tar, f"{root}/apt-offline.conf", tarfile.REGTYPE, 0o644, APT_OFFLINE.encode())
            for name in APPLETS:
                _add(tar, f"{root}/bin/{name}", tarfile.SYMTYPE, 0o777, link="../busybox")
        try:
            sb.api.put_archive(sb.id, "/", buf.getvalue())
        except Exception as e:  # noqa: BLE001 - docker.errors.APIError, connection errors
            raise SandboxError(f"sandbox {getattr(sb, 'name', sb.id)}: cannot install the static toolchain: {e}") from None
        tc = cls(sb, root, hashlib.sha256(data).hexdigest())
        sb.runner = ([tc.busybox, "sh"], {"PATH": tc.bin})
        return tc

    def sh(self, script: str, *args: str, timeout: float = 60) -> ExecResult:
        """Run `script` under the static sh as root, PATH = the applets only, killed after `timeout`."""
        argv = [self.busybox, "timeout", str(max(1, int(timeout))), self.busybox, "sh", "-c", script, "toolchain", *args]
        return self.sb.exec(argv, env={"PATH": self.bin}, user="0", workdir="/")

    def stop_agent_processes(self, keep_listeners: bool) -> StopReport:
        r = self.sh(STOP, "listeners" if keep_listeners else "all", self.root, timeout=60)
        rep = StopReport()
        for line in r.stdout.splitlines():
            word, _, rest = line.partition(" ")
            if word == "kept":
                pid, uid, *cmd = rest.split(" ", 2)
                rep.kept.append({"pid": int(pid), "uid": int(uid) if uid.isdigit() else uid,
                                 "cmdline": (cmd[0] if cmd else "").strip()})
            elif word == "victim":
                rep.victims.append(rest.strip()[:140])
            elif word == "killed" and rest.strip().isdigit():
                rep.killed = int(rest)
            elif word == "left":
                rep.left = [int(p) for p in rest.split() if p.isdigit()]
        if r.exit_code != 0 and not r.stdout:
            raise SandboxError(f"stopping the agent's processes failed: {(r.stderr or '').strip()[-300:]}")
        return rep

    def proc_facts(self) -> list[str]:
        return [ln for ln in self.sh(PROC_FACTS, timeout=30).stdout.splitlines() if ln.strip()]

    def remove(self, paths: list[str]) -> None:
        """rm -rf each path (no globbing, no PATH lookup). Long lists go through a file."""
        if not paths:
            return
        listing = f"{self.root}/remove.list"
        data = "".join(p + "\n" for p in paths if "\n" not in p).encode()
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            _add(tar, listing, tarfile.REGTYPE, 0o600, data)
        self.sb.api.put_archive(self.sb.id, "/", buf.getvalue())
        r = self.sh('while IFS= read -r p; do rm -rf -- "$p"; done < "$1"', listing, timeout=120)
        if r.exit_code != 0:
            raise SandboxError(f"removing {len(paths)} paths failed: {(r.stderr or '').strip()[-300:]}")

    def fresh_dirs(self, paths: list[str], mode: str = "755") -> None:
        """Remove each path (whatever it is: file, link, FIFO, tree) and create it as an empty
        directory; a non-directory parent (e.g. /logs made a symlink) is replaced too."""
        script = ('m=$1; shift; for p in "$@"; do d=${p%/*}; [ -n "$d" ] && { [ -d "$d" ] && [ ! -L "$d" ] || rm -rf -- "$d"; }; '
                  'rm -rf -- "$p"; mkdir -p -m "$m" -- "$p" || exit 1; done')
        r = self.sh(script, mode, *paths, timeout=60)
        if r.exit_code != 0:
            raise SandboxError(f"recreating {', '.join(paths)} failed: {(r.stderr or '').strip()[-300:]}")


def new_root() -> str:
    """A fresh random toolchain path: nothing in the container can have known it."""
    return f"/.metaopt-{secrets.token_hex(8)}"


def _add(tar: tarfile.TarFile, name: str, kind: bytes, mode: int, data: bytes = b"", link: str = "") -> None:
    info = tarfile.TarInfo(name.lstrip("/"))
    info.type, info.mode, info.uid, info.gid = kind, mode, 0, 0
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.linkname = link
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
