# The aim recipe's case (aim_cases.cc): the server's plan (dpc_plan) and
# the estimator it runs (core/train/aim.h PgmAimModel), which the
# statistic replays.
target_link_libraries(dpc_audit PUBLIC dpc_plan dpc_train_aim)
