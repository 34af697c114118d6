"""Writes of the flywheel, one module per concern:

validation  V(s) from the verifier, a judge / ORM, or two agreeing reviewers (per pool)
datasets    versioned dataset iterations (SFT / CT), cards, export through the store
sampling    the rejection-sampling episode runner (fleet leases or a local page)
training    SFT from a dataset, merge of checkpoints from one SFT parent, evaluation
refresh     task-pool refresh: success stats, curriculum buckets, weights, history
jobs        job rows: create + enqueue, cancel (a job's run: webapp.flywheel.job_run)
promotion   annotation model / RL start checkpoint
"""
