package dev.ratelimit.spring;

import dev.ratelimit.core.StatsRecorder;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A bucket's statistics and mode: shadow mode counts the interceptor's refusals apart, a grant taken
 * back never makes the granted count go down, and deferred refusals are not counted.
 */
class BucketStatsTests {

	@Test
	void aGrantTakenBackIsNotCountedAndTheCountNeverGoesDown() {
		BucketStats stats = new BucketStats(StatsRecorder.concurrent(), BucketMode.ENFORCE, false);
		stats.recordGranted(0);
		stats.recordGranted(0);
		assertThat(stats.granted()).isEqualTo(2);
		stats.ungrant();
		// read before the take-back is reflected: a counter never goes down, it waits for the next grant
		assertThat(stats.granted()).isEqualTo(2);
		stats.recordGranted(0);
		assertThat(stats.granted()).isEqualTo(2);
		stats.recordGranted(0);
		assertThat(stats.granted()).isEqualTo(3);
	}

	@Test
	void aGrantTakenBackBeforeAnyoneLookedIsNeverSeen() {
		BucketStats stats = new BucketStats(StatsRecorder.concurrent(), BucketMode.ENFORCE, false);
		stats.recordGranted(0);
		stats.ungrant();
		assertThat(stats.granted()).isZero();
	}

	@Test
	void deferredRefusalsAreLeftToTheInterceptorWhichCountsShadowRefusalsApart() {
		BucketStats stats = new BucketStats(StatsRecorder.concurrent(), BucketMode.ENFORCE, false);
		boolean before = BucketStats.defer(true);
		try {
			stats.recordRejected();
		}
		finally {
			BucketStats.defer(before);
		}
		assertThat(stats.rejected()).isZero();
		stats.refused();
		assertThat(stats.rejected()).isEqualTo(1);
		stats.mode(BucketMode.SHADOW);
		stats.refused();
		assertThat(stats.rejected()).isEqualTo(1);
		assertThat(stats.shadowRejected()).isEqualTo(1);
		// a direct refusal by the limiter still counts as rejected
		stats.recordRejected();
		assertThat(stats.rejected()).isEqualTo(2);
	}

	@Test
	void ratelimitModeShadowKeepsEveryBucketInShadowMode() {
		BucketStats stats = new BucketStats(StatsRecorder.concurrent(), BucketMode.ENFORCE, true);
		assertThat(stats.isShadow()).isTrue();
		assertThat(stats.mode()).isEqualTo(BucketMode.SHADOW);
		assertThatThrownBy(() -> stats.mode(BucketMode.ENFORCE)).isInstanceOf(IllegalArgumentException.class)
			.hasMessageContaining("ratelimit.mode is shadow");
	}

	/**
	 * A mode shared through a backend: a switch is stored there first (a store that fails changes
	 * nothing), the mode the backend says is in force is taken on, and none there means the configured one.
	 */
	@Test
	void aSharedModeIsStoredThroughTheBackendAndTakenOnFromIt() {
		BucketStats stats = new BucketStats(StatsRecorder.concurrent(), BucketMode.SHADOW, false);
		java.util.List<BucketMode> stored = new java.util.ArrayList<>();
		stats.shareModeThrough((mode) -> {
			if (stored.size() == 1) {
				throw new IllegalStateException("down");
			}
			stored.add(mode);
		});
		stats.mode(BucketMode.ENFORCE);
		assertThat(stored).containsExactly(BucketMode.ENFORCE);
		assertThat(stats.mode()).isEqualTo(BucketMode.ENFORCE);
		assertThatThrownBy(() -> stats.mode(BucketMode.SHADOW)).isInstanceOf(IllegalStateException.class);
		assertThat(stats.mode()).isEqualTo(BucketMode.ENFORCE);
		stats.adoptShared(BucketMode.SHADOW); // switched through another instance
		assertThat(stats.isShadow()).isTrue();
		stats.adoptShared(BucketMode.ENFORCE);
		assertThat(stats.isShadow()).isFalse();
		stats.adoptShared(null); // none in the backend (dropped by a restart with another configuration)
		assertThat(stats.mode()).isEqualTo(BucketMode.SHADOW);
	}
}
