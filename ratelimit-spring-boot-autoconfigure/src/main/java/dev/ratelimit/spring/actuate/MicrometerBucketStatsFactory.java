package dev.ratelimit.spring.actuate;

import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

import dev.ratelimit.core.StatsRecorder;
import dev.ratelimit.spring.BucketStatsFactory;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;

/**
 * Counts each bucket's calls in striped counters (read by the {@code ratelimit.calls} function
 * counters) and records the {@code ratelimit.wait} timer only for granted calls that waited: a call
 * that did not wait pays one counter increment and nothing else.
 */
class MicrometerBucketStatsFactory implements BucketStatsFactory {

	private final Supplier<MeterRegistry> meters;

	/**
	 * Creates the factory.
	 *
	 * @param meters the application's meter registry, asked for when a bucket is made
	 */
	public MicrometerBucketStatsFactory(Supplier<MeterRegistry> meters) {
		this.meters = meters;
	}

	@Override
	public StatsRecorder create(String bucket) {
		Timer timer = Timer.builder("ratelimit.wait")
			.tag("bucket", bucket)
			.description("Time granted calls spent waiting for tokens")
			.register(this.meters.get());
		return new TimedStats(StatsRecorder.concurrent(), timer);
	}

	private static final class TimedStats implements StatsRecorder {

		private final StatsRecorder counts;

		private final Timer waits;

		TimedStats(StatsRecorder counts, Timer waits) {
			this.counts = counts;
			this.waits = waits;
		}

		@Override
		public void recordGranted(long waitedNanos) {
			this.counts.recordGranted(waitedNanos);
			if (waitedNanos > 0) {
				this.waits.record(waitedNanos, TimeUnit.NANOSECONDS);
			}
		}

		@Override
		public void recordRejected() {
			this.counts.recordRejected();
		}

		@Override
		public long granted() {
			return this.counts.granted();
		}

		@Override
		public long rejected() {
			return this.counts.rejected();
		}
	}
}
