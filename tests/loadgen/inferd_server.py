"""Starts `inferd serve` on free ports and reads the real ones from its log (shared by
tests/loadgen/loadgen_test.py and bench/report/optimization.py)."""
import re
import signal
import subprocess
import threading
import time


class InferdServer:
    def __init__(self, inferd, repo, log_path, extra_args=(), timeout_s=300):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [inferd, "serve", "--model-repository", repo, "--http-port", "0", "--grpc-port", "0",
             "--metrics-port", "0", *extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.http = self.grpc = self.metrics = None
        deadline = time.time() + timeout_s
        lines = []
        while time.time() < deadline and not (self.http and self.grpc and self.metrics):
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            self.log.write(line)
            self.log.flush()
            if (m := re.search(r"HTTP KServe v2 listening on (http://\S+)", line)):
                self.http = m.group(1)
            if (m := re.search(r"gRPC KServe v2 listening on (\S+)", line)):
                self.grpc = "grpc://" + m.group(1)
            if (m := re.search(r"metrics listening on (http://\S+/metrics)", line)):
                self.metrics = m.group(1)
        if not (self.http and self.grpc and self.metrics):
            self.proc.kill()
            raise RuntimeError("inferd serve did not start:\n" + "".join(lines))
        self.startup_log = "".join(lines)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.log.write(line)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None
