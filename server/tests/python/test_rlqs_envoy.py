"""The simulated Envoy (`rlqs_envoy.py`) against what Envoy's source does, case by case (no
server: its decisions at chosen instants), so that the RLQS tests judge the server by the
client Envoy really is."""

import unittest

from envoy.service.rate_limit_quota.v3 import rlqs_pb2

from rlqs_envoy import ALLOW_ALL, DENY_ALL, Filter, TokenBucket, bucket_key, make_bucket_id

BUCKET = make_bucket_id({"tenant": "a"})


def response(*actions):
    return rlqs_pb2.RateLimitQuotaResponse(bucket_action=list(actions))


def token_bucket(max_tokens, per_fill, seconds=1, nanos=0, ttl=60, bucket=BUCKET):
    action = rlqs_pb2.RateLimitQuotaResponse.BucketAction(bucket_id=bucket)
    q = action.quota_assignment_action
    q.assignment_time_to_live.seconds = ttl
    tb = q.rate_limit_strategy.token_bucket
    tb.max_tokens, tb.tokens_per_fill.value = max_tokens, per_fill
    tb.fill_interval.seconds, tb.fill_interval.nanos = seconds, nanos
    return action


def blanket(rule, ttl=60):
    action = rlqs_pb2.RateLimitQuotaResponse.BucketAction(bucket_id=BUCKET)
    action.quota_assignment_action.assignment_time_to_live.seconds = ttl
    action.quota_assignment_action.rate_limit_strategy.blanket_rule = rule
    return action


def admitted(envoy, start, end, step=0.001):
    """Requests admitted by `envoy` for BUCKET, one every `step` seconds in [start, end)."""
    count, t = 0, start
    while t < end - 1e-9:
        count += envoy.request(BUCKET, t)[0]
        t += step
    return count


class SimulatedEnvoy(unittest.TestCase):
    def test_first_request_is_reported_at_once_and_then_every_bucket_each_report(self):
        envoy = Filter("d")
        allowed, first = envoy.request(BUCKET, 10.0)
        self.assertTrue(allowed)
        usage = first.bucket_quota_usages[0]
        self.assertEqual((first.domain, usage.num_requests_allowed, usage.time_elapsed.seconds),
                         ("d", 1, 0))
        envoy.request(BUCKET, 11.0)
        report = envoy.reports(12.9)
        usage = report.bucket_quota_usages[0]
        # Usage since the last report; whole seconds, rounded down.
        self.assertEqual((usage.num_requests_allowed, usage.time_elapsed.seconds), (1, 2))
        self.assertEqual(envoy.reports(13.0).bucket_quota_usages[0].num_requests_allowed, 0)

    def test_a_deny_all_default_denies_the_first_request(self):
        envoy = Filter("d", default=DENY_ALL)
        allowed, first = envoy.request(BUCKET, 0.0)
        self.assertFalse(allowed)
        self.assertEqual(first.bucket_quota_usages[0].num_requests_denied, 1)

    def test_token_bucket_starts_full_and_refills_at_tokens_per_fill_over_whole_seconds(self):
        envoy = Filter("d")
        envoy.request(BUCKET, 0.0)
        # 10 per 2.9 s: Envoy reads 2 whole seconds, 5 a second.
        envoy.apply(response(token_bucket(10, 10, seconds=2, nanos=900_000_000)), 0.0)
        self.assertEqual(admitted(envoy, 0.0, 0.0005), 1)
        self.assertEqual(admitted(envoy, 0.001, 0.011), 9)  # the rest of the full bucket
        self.assertEqual(admitted(envoy, 0.011, 2.011), 10)  # 5 a second

    def test_a_changed_bucket_carries_its_fill_ratio_and_an_equal_one_is_kept(self):
        envoy = Filter("d")
        envoy.request(BUCKET, 0.0)
        envoy.apply(response(token_bucket(10, 1)), 0.0)
        self.assertEqual(admitted(envoy, 0.0, 0.006), 6)  # 4 of 10 left
        envoy.apply(response(token_bucket(10, 1)), 0.006)  # equal: the same limiter
        self.assertEqual(admitted(envoy, 0.007, 0.02), 4)
        envoy.apply(response(token_bucket(5, 1)), 0.02)  # 0 of 10 left -> floor(5 * 0.0)
        self.assertEqual(admitted(envoy, 0.02, 0.5), 0)
        # A change of fill_interval's seconds alone is not seen (protoTokenBucketsEq): still
        # 1 a second (1.48 tokens at 1.5 s, one more by 2.02 s), where a new limiter at 1 per
        # 1000 s would start at floor(5 * 1.48 / 5) = 1 and admit 1.
        envoy.apply(response(token_bucket(5, 1, seconds=1000)), 1.5)
        self.assertEqual(admitted(envoy, 1.5, 2.5), 2)

    def test_ttl_reads_whole_seconds_and_expiry_returns_to_the_default(self):
        envoy = Filter("d", default=ALLOW_ALL)
        envoy.request(BUCKET, 0.0)
        envoy.apply(response(blanket(DENY_ALL, ttl=2)), 0.0)
        self.assertFalse(envoy.request(BUCKET, 1.0)[0])
        self.assertEqual(envoy.next_expiry(), 2.0)
        envoy.expire(2.0)
        self.assertTrue(envoy.request(BUCKET, 2.1)[0])
        action = blanket(DENY_ALL, ttl=0)
        action.quota_assignment_action.assignment_time_to_live.nanos = 900_000_000
        envoy.apply(response(action), 3.0)
        self.assertEqual(envoy.next_expiry(), 3.0, "0.9 s reads as 0: expires at once")

    def test_requests_per_time_unit_is_skipped_and_abandon_erases(self):
        envoy = Filter("d")
        envoy.request(BUCKET, 0.0)
        envoy.apply(response(blanket(DENY_ALL)), 0.0)
        rptu = blanket(DENY_ALL)
        rptu.quota_assignment_action.rate_limit_strategy.requests_per_time_unit. \
            requests_per_time_unit = 5
        envoy.apply(response(rptu), 1.0)
        self.assertFalse(envoy.request(BUCKET, 1.1)[0], "the previous action stays")
        abandon = rlqs_pb2.RateLimitQuotaResponse.BucketAction(bucket_id=BUCKET)
        abandon.abandon_action.SetInParent()
        envoy.apply(response(abandon), 2.0)
        self.assertNotIn(bucket_key(BUCKET), envoy.buckets)
        allowed, first = envoy.request(BUCKET, 2.1)
        self.assertTrue(allowed)
        self.assertIsNotNone(first, "recreated: reported at once again")

    def test_the_limiter_is_envoys_atomic_token_bucket(self):
        bucket = TokenBucket(3, 2.0, 100.0)
        self.assertEqual([bucket.consume(100.0) for _ in range(4)], [True, True, True, False])
        self.assertFalse(bucket.consume(100.4))  # 0.8 of a token
        self.assertTrue(bucket.consume(100.5))
        self.assertEqual(TokenBucket(3, 2.0, 0.0, initial_tokens=0).remaining(1.0), 2.0)


if __name__ == "__main__":
    unittest.main()
