"""The HorizontalPodAutoscaler v2 algorithm, replayed over a load trace (tests/k8s/traces/*.csv).

Follows the Kubernetes controller (pkg/controller/podautoscaler, documented in "Horizontal Pod
Autoscaling", algorithm details):
  - per metric: ratio = current / target; within the tolerance (|ratio - 1| <= 0.1) the proposal
    is the current count, else ceil(current_ready_pods * ratio); the largest proposal wins;
  - stabilization: the recommendation used is at least the lowest of the scale-up window's and at
    most the highest of the scale-down window's (default 0 s up, 300 s down);
  - rate policies (behavior.scaleUp/scaleDown.policies, selectPolicy Max/Min) limit the change
    relative to the count at the start of each policy's period;
  - minReplicas..maxReplicas.
The pods are modelled simply: a pod is ready as soon as it is created; each serves up to
cpu_request / cpu_seconds_per_request requests/s (the rest of the offered load is not served);
CPU utilization is the served work over the CPU request (at most 100%), averaged over the last
15 s; the custom metric inferd_requests_per_second is the served rate per pod averaged over the
adapter's 1 minute rate() window, as prometheus-adapter-config.yaml computes it.
"""

import csv
import math
from dataclasses import dataclass, field

SYNC_PERIOD_S = 15  # the controller manager's --horizontal-pod-autoscaler-sync-period default
TOLERANCE = 0.1     # --horizontal-pod-autoscaler-tolerance default


def proposal(current, value, target):
    """Replicas one metric asks for: current ready pods scaled by value / target, or current
    within the tolerance."""
    ratio = value / target
    if abs(ratio - 1.0) <= TOLERANCE:
        return current
    return math.ceil(current * ratio)


@dataclass
class Trace:
    name: str
    cpu_seconds_per_request: float
    rows: list  # (t_s, offered_qps), ascending t, fixed step

    @staticmethod
    def load(path):
        params, rows = {}, []
        with open(path) as f:
            lines = [l for l in f if l.strip()]
        for l in lines:
            if l.startswith("#"):
                for kv in l[1:].split():
                    if "=" in kv:
                        k, v = kv.split("=", 1)
                        params[k] = v
        reader = csv.DictReader(l for l in lines if not l.startswith("#"))
        for r in reader:
            rows.append((float(r["t_s"]), float(r["qps"])))
        return Trace(path.rsplit("/", 1)[-1], float(params["cpu_seconds_per_request"]), rows)

    def qps_at(self, t):
        """Offered load at t (the row at or before it)."""
        q = self.rows[0][1]
        for rt, rq in self.rows:
            if rt > t:
                break
            q = rq
        return q


@dataclass
class Hpa:
    min_replicas: int
    max_replicas: int
    cpu_target_pct: float          # averageUtilization of the cpu Resource metric
    rate_metric: str               # name of the Pods metric
    rate_target: float             # its averageValue
    up_window_s: int
    down_window_s: int
    up_policies: list              # (type, value, period_s)
    down_policies: list
    up_select: str
    down_select: str
    cpu_request_cores: float

    @staticmethod
    def from_manifests(hpa, deployment):
        spec = hpa["spec"]
        cpu = next(m for m in spec["metrics"] if m["type"] == "Resource")["resource"]
        pods = next(m for m in spec["metrics"] if m["type"] == "Pods")["pods"]
        b = spec.get("behavior", {})
        up, down = b.get("scaleUp", {}), b.get("scaleDown", {})
        pol = lambda d: [(p["type"], p["value"], p["periodSeconds"]) for p in d.get("policies", [])]
        req = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"]
        cores = float(req[:-1]) / 1000 if str(req).endswith("m") else float(req)
        return Hpa(spec.get("minReplicas", 1), spec["maxReplicas"],
                   cpu["target"]["averageUtilization"], pods["metric"]["name"],
                   float(pods["target"]["averageValue"]),
                   up.get("stabilizationWindowSeconds", 0), down.get("stabilizationWindowSeconds", 300),
                   pol(up) or [("Percent", 100, 15), ("Pods", 4, 15)], pol(down) or [("Percent", 100, 15)],
                   up.get("selectPolicy", "Max"), down.get("selectPolicy", "Max"), cores)


@dataclass
class Step:
    t: float
    offered_qps: float
    replicas: int          # after this sync
    cpu_pct: float         # the CPU utilization the HPA saw
    rate_per_pod: float    # the custom metric it saw
    desired: int           # the raw proposal (before stabilization and policies)


@dataclass
class Replay:
    hpa: Hpa
    trace: Trace
    replicas: int = 0
    recommendations: list = field(default_factory=list)  # (t, replicas)
    events: list = field(default_factory=list)           # (t, change)
    per_second: list = field(default_factory=list)       # replicas serving second i of the trace

    def served_per_pod(self, t, replicas):
        capacity = self.hpa.cpu_request_cores / self.trace.cpu_seconds_per_request
        return min(self.trace.qps_at(t) / replicas, capacity)

    def mean_served_per_pod(self, t, window_s):
        """Served requests/s per pod over the seconds [t - window, t), at the replica counts of
        the time."""
        t0 = self.trace.rows[0][0]
        first = max(0, int(t - t0) - window_s)
        idx = range(first, int(t - t0))
        return sum(self.served_per_pod(t0 + i, self.per_second[i]) for i in idx) / len(idx)

    def limit(self, t, current, desired):
        """Applies the behavior's rate policies (change relative to the count at the start of each
        policy's period)."""
        def start_of_period(period, sign):
            changed = sum(c for et, c in self.events if et > t - period and (c > 0) == (sign > 0))
            return current - changed
        if desired > current:
            limits = []
            for typ, value, period in self.hpa.up_policies:
                base = start_of_period(period, +1)
                limits.append(base + value if typ == "Pods" else math.ceil(base * (1 + value / 100)))
            cap = max(limits) if self.hpa.up_select == "Max" else min(limits)
            return min(desired, cap, self.hpa.max_replicas)
        if desired < current:
            limits = []
            for typ, value, period in self.hpa.down_policies:
                base = start_of_period(period, -1)
                limits.append(base - value if typ == "Pods" else math.floor(base * (1 - value / 100)))
            floor_ = min(limits) if self.hpa.down_select == "Max" else max(limits)
            return max(desired, floor_, self.hpa.min_replicas)
        return current

    def sync(self, t):
        cur = self.replicas
        cpu = min(100.0, 100.0 * self.mean_served_per_pod(t, 15) * self.trace.cpu_seconds_per_request
                  / self.hpa.cpu_request_cores)
        rate = self.mean_served_per_pod(t, 60)
        desired = max(proposal(cur, cpu, self.hpa.cpu_target_pct),
                      proposal(cur, rate, self.hpa.rate_target))
        desired = max(self.hpa.min_replicas, min(self.hpa.max_replicas, desired))
        # Stabilization over the recommendations of the windows (this one included).
        self.recommendations.append((t, desired))
        up = min([r for rt, r in self.recommendations if rt > t - self.hpa.up_window_s] + [desired])
        down = max([r for rt, r in self.recommendations if rt > t - self.hpa.down_window_s] + [desired])
        stabilized = min(max(cur, up), down)
        new = self.limit(t, cur, stabilized)
        if new != cur:
            self.events.append((t, new - cur))
        self.replicas = new
        return Step(t, self.trace.qps_at(t), new, cpu, rate, desired)

    def run(self, start_replicas=None):
        """Replays the trace second by second, the HPA syncing every SYNC_PERIOD_S."""
        self.replicas = start_replicas or self.hpa.min_replicas
        t0, t_end = self.trace.rows[0][0], self.trace.rows[-1][0]
        steps = []
        for i in range(int(t_end - t0) + 1):
            if i > 0 and i % SYNC_PERIOD_S == 0:
                steps.append(self.sync(t0 + i))
            self.per_second.append(self.replicas)
        return steps
