# Whole-session cases (session_cases.cc): the release kinds' engines and the
# dp_sgd step's network, never server/.
target_link_libraries(dpc_audit PUBLIC dpc_nn Eigen3::Eigen)
