#!/usr/bin/env bash
# Builds the benchmarks and runs all of them: the JMH try path against the peers (1 and 2 threads,
# with allocation per operation), the references, the annotation's cost, the blocking-accuracy table
# and one hot key on a local Redis (started by the program itself, on loopback).
# About 15 minutes on a 2-core machine. Results land in ratelimit-benchmarks/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
./mvnw -B -q -pl ratelimit-benchmarks -am package -DskipTests
jar=ratelimit-benchmarks/target/benchmarks.jar
out=ratelimit-benchmarks/results
mkdir -p "$out"
{
	echo "date: $(date -u +%FT%TZ)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
	echo "memory: $(free -g | awk '/Mem:/{print $2}') GiB"
	echo "java: $(java -version 2>&1 | head -1)"
	echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/machine.txt"
for threads in 1 2; do
	java -jar "$jar" 'TryPathBenchmark|ReferenceBenchmark' -t "$threads" -prof gc \
		-rf csv -rff "$out/try-path-t$threads.csv" | tee "$out/try-path-t$threads.log"
done
java -jar "$jar" AnnotationBenchmark -rf csv -rff "$out/annotation.csv" | tee "$out/annotation.log"
java -cp "$jar" dev.ratelimit.benchmarks.BlockingAccuracy 2 | tee "$out/blocking-accuracy.md"
java -cp "$jar" dev.ratelimit.benchmarks.redis.RedisHotKey 5 | tee "$out/redis-hot-key.md"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/machine.txt"
