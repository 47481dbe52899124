"""Writes the synthetic load traces of tests/k8s/traces (offered requests/s every 5 s); rerun after
changing a shape: /usr/bin/python3 tests/k8s/traces/make_traces.py."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def write(name, comment, cpu_seconds_per_request, qps_of_t, seconds):
    with open(os.path.join(HERE, name), "w") as f:
        f.write(f"# {comment}\n# cpu_seconds_per_request={cpu_seconds_per_request}\n")
        f.write("t_s,qps\n")
        for t in range(0, seconds + 1, 5):
            f.write(f"{t},{qps_of_t(t):g}\n")


def ramp(t):
    if t < 600:
        return 50 + 400 * t / 600
    if t < 900:
        return 450
    if t < 1500:
        return 450 - 400 * (t - 900) / 600
    return 50


# 40 requests/s for 10 min, a step to 400 for 10 min, back to 40 for 15 min.
write("step.csv", "load step 40 -> 400 -> 40 requests/s", 0.02,
      lambda t: 400 if 600 <= t < 1200 else 40, 2100)
# 100 requests/s with a one-minute spike to 600 at 5 min.
write("spike.csv", "one-minute spike 100 -> 600 requests/s", 0.02,
      lambda t: 600 if 300 <= t < 360 else 100, 1200)
# A ramp 50 -> 450 requests/s over 10 min, a plateau, and back down over 10 min.
write("ramp.csv", "ramp 50 -> 450 -> 50 requests/s", 0.02, ramp, 2100)
# CPU-heavy requests (60 ms each): CPU, not the request rate, decides.
write("cpu_bound.csv", "150 requests/s of 60 ms CPU each, after 2 min at 10", 0.06,
      lambda t: 150 if t >= 120 else 10, 900)
