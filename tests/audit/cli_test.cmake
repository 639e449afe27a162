# `dpcurator audit` lives in the client library.
target_link_libraries(audit_cli_test PRIVATE dpc_client)
