# Sourced by the scripts: offline, quiet, single-threaded BLAS on small machines.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export MEM0_TELEMETRY=False
export GRAPHITI_TELEMETRY_ENABLED=false
export ANONYMIZED_TELEMETRY=False
export TOKENIZERS_PARALLELISM=false
