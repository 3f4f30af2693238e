"""Gavel's round-based mechanism (§5) with fleetplan embedded: docs/embedding.md explains it."""
import numpy as np

from fleetplan.embed import AllocationSession

rng = np.random.default_rng(0)
workers = {"v100": 2, "p100": 2, "k80": 2}
session = AllocationSession(workers, solver="max-min-fairness")
throughput, steps_left, rounds_on, age = {}, {}, {}, {}  # the scheduler's own state, per job
ROUND_S = 360.0  # Gavel's 6-minute rounds
for round_number in range(40):
    if round_number % 3 == 0:  # a job arrives
        job = f"job{round_number}"
        throughput[job] = rng.uniform(0.5, 2.0) * np.array([4.0, 2.0, 1.0])  # steps/s on each type
        steps_left[job], rounds_on[job], age[job] = 20_000.0, np.zeros(3), 0
        session.add_jobs({"id": [job], "throughput": throughput[job][None, :]})
    if len(session) == 0:
        continue
    plan = session.solve().plan  # X: the share of time each job should get on each type
    share = np.array(plan.allocation)
    for job in plan.job_ids:
        age[job] += 1
    received = np.array([rounds_on[job] / age[job] for job in plan.job_ids])  # share of rounds had
    priority = share / np.maximum(received, 1e-3)  # Gavel: X over the share received
    free, running = dict(workers), set()
    for flat in np.argsort(-priority, axis=None, kind="stable"):  # highest priority first
        row, k = divmod(int(flat), len(workers))
        job, gpu = plan.job_ids[row], list(workers)[k]
        if share[row, k] > 0 and free[gpu] > 0 and job not in running:
            free[gpu] -= 1
            running.add(job)
            rounds_on[job][k] += 1
            steps_left[job] -= throughput[job][k] * ROUND_S
    finished = [job for job in running if steps_left[job] <= 0]
    session.remove_jobs(finished)
    print(f"round {round_number:2d}: {len(running)} running, {len(finished)} finished, {len(session)} waiting or running")
