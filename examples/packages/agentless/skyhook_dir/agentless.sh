#!/bin/sh
# The agentless test step: sleep SLEEP_LEN seconds (default 0), then exit with EXIT_CODE
# (default 0). Used by devcluster's agentless image and by package tests with the real agent.
SLEEP_LEN=${SLEEP_LEN:-0}
EXIT_CODE=${EXIT_CODE:-0}
echo "agentless [$*] sleep for ${SLEEP_LEN} and exit with ${EXIT_CODE}"
sleep "${SLEEP_LEN}"
exit "${EXIT_CODE}"
