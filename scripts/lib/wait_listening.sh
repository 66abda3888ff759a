# Sourced by the benchmark scripts.
# wait_listening NAME PORT LOG: waits up to 10 s for a server to accept on 127.0.0.1:PORT;
# if it does not, prints LOG (the server's output) and exits the script.
wait_listening() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "$1 did not start listening on $2:" >&2; cat "$3" >&2; exit 1
}
