# The aim recipe's case (aim_cases.cc): core/train/aim.h's loop.
target_link_libraries(dpc_audit PUBLIC dpc_train_aim)
