"""wrk as `bench/api.py`'s load generator: a Lua script per operation (its method, paths, body
and headers, a new x-transaction-id per request) whose `done()` prints one JSON line, and the
server's CPU time around each round."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.server_processes import cpu_seconds

_LUA = """-- written by bench/api_wrk.py
local method = "{method}"
local paths = {{{paths}}}
local body = {body}
local headers = {{{headers}}}
math.randomseed(os.time() + {seed})

local function r(n) return math.random(0, n) end
local function uuid4()
  return string.format("%04x%04x-%04x-4%03x-%04x-%04x%04x%04x", r(65535), r(65535), r(65535),
    r(4095), 32768 + r(16383), r(65535), r(65535), r(65535))
end

request = function()
  headers["x-transaction-id"] = uuid4()
  return wrk.format(method, paths[math.random(#paths)], headers, body)
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '\\nBENCH_JSON {{"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, ' ..
    '"non_2xx": %d, "socket_errors": %d}}\\n',
    summary.requests, summary.duration, math.floor(latency:percentile(50)),
    math.floor(latency:percentile(99)), e.status, e.connect + e.read + e.write + e.timeout))
end
"""


@dataclass(frozen=True)
class Load:
    """What one operation sends: the same to Tucano and to the ceilings."""

    method: str
    paths: list[str]
    headers: dict[str, str]
    body: bytes | None = None

    def script(self, directory: Path, name: str) -> Path:
        path = directory / f"{name}.lua"
        path.write_text(
            _LUA.format(
                method=self.method,
                paths=", ".join(_lua_string(p) for p in self.paths),
                body="nil" if self.body is None else _lua_string(self.body.decode()),
                headers=", ".join(
                    f"[ {_lua_string(k)} ] = {_lua_string(v)}" for k, v in self.headers.items()
                ),
                seed=abs(hash(name)) % 100_000,
            )
        )
        return path


def _lua_string(text: str) -> str:
    return "[==[" + text + "]==]"


@dataclass(frozen=True)
class Round:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int  # answers other than 2xx/3xx, and sockets that failed
    cpu_us_per_request: float

    @property
    def rate(self) -> float:
        return self.requests / self.seconds


def require_wrk() -> str:
    """The wrk command, or exit 2 saying how to install it."""
    wrk = shutil.which("wrk")
    if wrk is None:
        print("bench/api.py needs wrk: apt-get install -y wrk", file=sys.stderr)
        sys.exit(2)
    return wrk


def run_round(
    wrk: str, base_url: str, script: Path, *, pid: int, seconds: int, connections: int
) -> Round:
    """One wrk run of `seconds` against `base_url`, and the CPU time `pid` used meanwhile."""
    cpu_before = cpu_seconds(pid)
    done = subprocess.run(
        [
            *(wrk, "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s"),
            *("-s", str(script), base_url),
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=False,
    )
    cpu = cpu_seconds(pid) - cpu_before
    lines = [line for line in done.stdout.splitlines() if line.startswith("BENCH_JSON ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stdout}\n{done.stderr}")
    result = json.loads(lines[-1].removeprefix("BENCH_JSON "))
    requests = int(result["requests"])
    return Round(
        requests=requests,
        seconds=result["duration_us"] / 1e6,
        p50_ms=result["p50_us"] / 1000,
        p99_ms=result["p99_us"] / 1000,
        errors=int(result["non_2xx"]) + int(result["socket_errors"]),
        cpu_us_per_request=cpu * 1e6 / requests if requests else 0.0,
    )
