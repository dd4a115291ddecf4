"""Syscalls per lone decision (usage: python3 benches/rls/lone_syscalls.py SERVER_BIN RTT_MS RATE TAG;
N1, N2: the two run lengths, 1 000 and 4 000 by default).

Syscalls per lone decision of redlimit-server: Redis on loopback or RTT ms away through a
delay proxy, a paced client at RATE/s; strace -c -f of the server for N1 and N2 decisions, the
difference per decision."""
import asyncio, os, shutil, signal, socket, subprocess, sys, tempfile, threading, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "server", "tests", "python"))
import grpc
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2

BIN, RTT_MS, RATE, TAG = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]

def proxy(listen, upstream, one_way):
    async def pipe(r, w):
        q = asyncio.Queue()
        async def writer():
            while True:
                due, data = await q.get()
                if data is None: w.close(); return
                d = due - time.monotonic()
                if d > 0: await asyncio.sleep(d)
                w.write(data); await w.drain()
        t = asyncio.create_task(writer())
        while True:
            data = await r.read(65536)
            if not data: await q.put((0, None)); break
            await q.put((time.monotonic() + one_way, data))
        await t
    async def handle(cr, cw):
        ur, uw = await asyncio.open_connection("127.0.0.1", upstream)
        for s in (cw, uw):
            s.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(pipe(cr, uw), pipe(ur, cw), return_exceptions=True)
    async def main():
        srv = await asyncio.start_server(handle, "127.0.0.1", listen)
        async with srv: await srv.serve_forever()
    asyncio.run(main())

def run(n):
    rport = free_port()
    rdir = tempfile.mkdtemp()
    redis = subprocess.Popen(["redis-server", "--port", str(rport), "--save", "", "--appendonly", "no", "--dir", rdir], stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    target = rport
    pproc = None
    if RTT_MS > 0:
        pport = free_port()
        pproc = subprocess.Popen([sys.executable, __file__, "--proxy", str(pport), str(rport), str(RTT_MS / 2000)])
        time.sleep(0.7); target = pport
    root = tempfile.mkdtemp()
    os.makedirs(f"{root}/ratelimit/config")
    open(f"{root}/ratelimit/config/bench.yaml", "w").write(
        "domain: bench\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 100000000}\n")
    env = {"PATH": os.environ["PATH"], "HOST": "127.0.0.1", "PORT": "0", "GRPC_HOST": "127.0.0.1", "GRPC_PORT": "0",
           "DEBUG_HOST": "127.0.0.1", "DEBUG_PORT": "0", "RUNTIME_ROOT": root, "RUNTIME_SUBDIRECTORY": "ratelimit",
           "LOG_LEVEL": "warn", "USE_STATSD": "false", "REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": f"127.0.0.1:{target}", "REDLIMIT_STORE_DEADLINE": "200ms"}
    out = os.path.join(tempfile.gettempdir(), f"st.{TAG}.{n}")
    st = subprocess.Popen(["strace", "-c", "-f", "-o", out, BIN], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    grpc_addr = None
    while grpc_addr is None:
        line = st.stdout.readline()
        if line.startswith("grpc on "): grpc_addr = line.strip()[8:]
    threading.Thread(target=lambda: [None for _ in st.stdout], daemon=True).start()
    ch = grpc.insecure_channel(grpc_addr); stub = rls_pb2_grpc.RateLimitServiceStub(ch)
    req = rls_pb2.RateLimitRequest(domain="bench", descriptors=[ratelimit_pb2.RateLimitDescriptor(entries=[ratelimit_pb2.RateLimitDescriptor.Entry(key="k", value="v")])])
    print("grpc", grpc_addr, flush=True)
    for _ in range(50):
        try: stub.ShouldRateLimit(req, timeout=5)  # warm
        except Exception: pass
    print("warm", flush=True)
    futs = []
    gap = 1.0 / RATE; t0 = time.monotonic(); errors = 0
    for i in range(n):
        due = t0 + i * gap
        d = due - time.monotonic()
        if d > 0: time.sleep(d)
        futs.append(stub.ShouldRateLimit.future(req, timeout=5))
    codes = {}
    for f in futs:
        try: c = f.result().overall_code
        except Exception as e: c = "err"
        codes[c] = codes.get(c, 0) + 1
    took = time.monotonic() - t0
    ch.close()
    child = subprocess.run(["pgrep", "-P", str(st.pid)], capture_output=True, text=True).stdout.split()
    for c in child: os.kill(int(c), signal.SIGTERM)
    st.wait(timeout=20)
    for p in (pproc, redis):
        if p: p.kill(); p.wait()
    shutil.rmtree(root, ignore_errors=True); shutil.rmtree(rdir, ignore_errors=True)
    print(f"{TAG} n={n} took={took:.2f}s codes={codes}", flush=True)
    return out

def load(f):
    d = {}
    for l in open(f):
        p = l.split()
        if len(p) >= 5 and p[-1].replace("_", "").isalnum() and p[-1] != "syscall":
            try: d[p[-1]] = int(p[3])
            except ValueError: pass
    return d

if __name__ == "__main__":
    if sys.argv[1] == "--proxy":
        proxy(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])); sys.exit()
    n1, n2 = int(os.environ.get("N1", 1000)), int(os.environ.get("N2", 4000))
    a = load(run(n1)); b = load(run(n2))
    rows = {k: (b.get(k, 0) - a.get(k, 0)) / (n2 - n1) for k in set(a) | set(b)}
    print(TAG, " ".join(f"{k} {v:.2f}" for k, v in sorted(rows.items(), key=lambda kv: -kv[1]) if abs(v) >= 0.02))
