# Whole-session cases (session_cases.cc): the server's plan code (dpc_plan,
# linked by dpc_audit), its in-memory dataset fixture, and the dp_sgd
# query's network.
target_link_libraries(dpc_audit PUBLIC dpc_nn Eigen3::Eigen)
