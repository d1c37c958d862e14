"""Scheduled tasks: rules, plans, the EventBridge Scheduler port, runs, the repair pass."""

# The reconciler function's input from the hourly rule that deletes orphan schedules (infra's
# ScheduledTasks construct sends it; functions/reconcile_turns answers it).
ORPHAN_SCHEDULES_JOB = "orphan_schedules"
