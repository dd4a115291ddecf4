"""One Envoy's `rate_limit_quota` filter, as Envoy's source decides (no I/O: the fleet in
`rlqs_fleet.py` moves its messages and its clock). Read from envoyproxy/envoy,
`source/extensions/filters/http/rate_limit_quota/`:

- `filter.cc` `recordBucketUsage`: a request for a bucket not in the cache creates it, decided
  by the `no_assignment_behavior` (only a blanket DENY_ALL denies the first request);
  `shouldAllowRequest`: a cached bucket follows its assigned action, or its default when none
  is assigned; ALLOW_ALL/DENY_ALL, a token bucket (`consume(1, false)`), and anything else
  (`requests_per_time_unit`, no strategy) admits.
- `global_client_impl.cc` `createBucketImpl`: a new bucket is reported at once (its first
  request, `time_elapsed` 0); `buildReports`/`getUsageFromBucket`: every cached bucket in each
  periodic report, usage since its last report (then zeroed), `time_elapsed` in whole seconds
  rounded down; `onQuotaResponseImpl`: unknown or id-less buckets skipped, a blanket rule or a
  token bucket assigned (a token bucket equal by `protoTokenBucketsEq` keeps its limiter, a
  different one replaces it by `createTokenBucketFromAction`, carrying the fill ratio),
  `requests_per_time_unit` or no strategy skipped (the bucket keeps its previous action and
  timer), `abandon_action` erases the bucket; every assignment restarts the bucket's expiry
  timer at `assignment_time_to_live.seconds` (`startActionExpirationTimer`);
  `onActionExpirationTimer`: without an expired-assignment fallback the bucket returns to its
  default action and drops its limiter.
- `source/common/common/token_bucket_impl.cc` `AtomicTokenBucketImpl`: the state is one time
  stamp; tokens = min(max, (now - stamp) * rate), continuous refill, starting full (or at the
  given initial tokens); consuming moves the stamp.
"""

import math

from envoy.service.rate_limit_quota.v3 import rlqs_pb2
from envoy.type.v3 import ratelimit_strategy_pb2

RateLimitStrategy = ratelimit_strategy_pb2.RateLimitStrategy
ALLOW_ALL = RateLimitStrategy.ALLOW_ALL
DENY_ALL = RateLimitStrategy.DENY_ALL

# AtomicTokenBucketImpl's floor on the fill rate: one token a year.
MIN_FILL_RATE = 1.0 / (365 * 24 * 60 * 60)


def cpp_min(a, b):
    """`std::min(a, b)`: `b < a ? b : a` (NaN compares false, so it picks `a`)."""
    return b if b < a else a


def cpp_max(a, b):
    """`std::max(a, b)`: `a < b ? b : a`."""
    return b if a < b else a


def divide(a, b):
    """C++ double division (IEEE: x/0 is +-inf, 0/0 NaN), where Python would raise."""
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a)
    return a / b


class TokenBucket:
    """Envoy's `AtomicTokenBucketImpl`: `max_tokens`, `fill_rate` tokens a second, starting
    with `initial_tokens` (full when None) at `now`."""

    def __init__(self, max_tokens, fill_rate, now, initial_tokens=None):
        self.max_tokens = float(max_tokens)
        self.fill_rate = cpp_max(abs(fill_rate), MIN_FILL_RATE)
        initial = self.max_tokens if initial_tokens is None else float(initial_tokens)
        self.stamp = now - divide(initial, self.fill_rate)

    def consume(self, now):
        """`consume(1, /*allow_partial=*/false)`: whether one token was taken at `now`."""
        if now <= self.stamp:
            return False
        total = cpp_min(self.max_tokens, (now - self.stamp) * self.fill_rate)
        if not total >= 1.0:
            return False
        self.stamp = now - divide(total - 1.0, self.fill_rate)
        return True

    def remaining(self, now):
        """`remainingTokens()`."""
        return cpp_min(self.max_tokens, (now - self.stamp) * self.fill_rate)


def token_bucket_from_strategy(strategy, now, existing):
    """`createTokenBucketFromAction`: rate = tokens_per_fill / whole seconds of fill_interval
    (`absl::ToInt64Seconds`, truncated), starting at max * (existing's remaining / existing's
    max) truncated to an integer when it replaces a limiter, full otherwise."""
    tb = strategy.token_bucket
    seconds = int(tb.fill_interval.seconds + tb.fill_interval.nanos / 1e9)
    rate = divide(float(tb.tokens_per_fill.value), float(seconds))
    initial = None
    if existing is not None:
        ratio = divide(existing.remaining(now), existing.max_tokens)
        initial = math.floor(tb.max_tokens * ratio) if math.isfinite(ratio) else 0
    return TokenBucket(tb.max_tokens, rate, now, initial)


def same_token_bucket(new, old):
    """`protoTokenBucketsEq`: max_tokens, tokens_per_fill and fill_interval's *nanos* (a change
    of its seconds alone is not seen)."""
    return (new.max_tokens == old.max_tokens
            and new.tokens_per_fill.value == old.tokens_per_fill.value
            and new.fill_interval.nanos == old.fill_interval.nanos)


def bucket_key(bucket_id):
    """The cache's key for a BucketId (Envoy's `MessageUtil::hash` of it: its content)."""
    return tuple(sorted(bucket_id.bucket.items()))


def make_bucket_id(entries):
    """A BucketId from a dict of key -> value."""
    return rlqs_pb2.BucketId(bucket=dict(entries))


class EnvoyCrash(Exception):
    """Where Envoy dereferences a null limiter (a token bucket default action)."""


class CachedBucket:
    """`CachedBucket` in `quota_bucket_cache.h`: its id, usage since the last report, the
    assigned action (None: the default), the limiter and the expiry deadline."""

    __slots__ = ("bucket_id", "allowed", "denied", "last_report", "action", "limiter",
                 "expires")

    def __init__(self, bucket_id, allowed, now):
        self.bucket_id = bucket_id
        self.allowed, self.denied = (1, 0) if allowed else (0, 1)
        self.last_report = now
        self.action = None
        self.limiter = None
        self.expires = None


class Filter:
    """One Envoy's buckets for one (server, domain): `default` is the `no_assignment_behavior`
    blanket rule (ALLOW_ALL when unset, as Envoy's). `events` records what the server made of
    each bucket: (time, key, kind, detail), kind one of assign, abandon, expire, skip."""

    def __init__(self, domain, default=ALLOW_ALL):
        self.domain = domain
        self.default = default
        self.buckets = {}
        self.events = []

    def _strategy(self, bucket):
        if bucket.action is None:
            return RateLimitStrategy(blanket_rule=self.default)
        if bucket.action.HasField("quota_assignment_action"):
            return bucket.action.quota_assignment_action.rate_limit_strategy
        return RateLimitStrategy()

    def request(self, bucket_id, now):
        """One request at `now`: (allowed, first report) where the first report is the
        message a new bucket sends at once, None for a cached bucket."""
        key = bucket_key(bucket_id)
        bucket = self.buckets.get(key)
        if bucket is None:
            allowed = self.default != DENY_ALL
            bucket = CachedBucket(bucket_id, allowed, now)
            self.buckets[key] = bucket
            report = rlqs_pb2.RateLimitQuotaUsageReports(domain=self.domain)
            self._usage(bucket, now, report.bucket_quota_usages.add())
            return allowed, report
        strategy = self._strategy(bucket)
        kind = strategy.WhichOneof("strategy")
        if kind == "blanket_rule":
            allowed = strategy.blanket_rule == ALLOW_ALL
        elif kind == "token_bucket":
            if bucket.limiter is None:
                raise EnvoyCrash("a token bucket action without its limiter")
            allowed = bucket.limiter.consume(now)
        else:
            allowed = True
        if allowed:
            bucket.allowed += 1
        else:
            bucket.denied += 1
        return allowed, None

    @staticmethod
    def _usage(bucket, now, usage):
        usage.bucket_id.CopyFrom(bucket.bucket_id)
        usage.num_requests_allowed = bucket.allowed
        usage.num_requests_denied = bucket.denied
        bucket.allowed = bucket.denied = 0
        usage.time_elapsed.seconds = int(now - bucket.last_report)
        bucket.last_report = now

    def reports(self, now):
        """The periodic report: every cached bucket's usage since its last report."""
        report = rlqs_pb2.RateLimitQuotaUsageReports(domain=self.domain)
        for bucket in self.buckets.values():
            self._usage(bucket, now, report.bucket_quota_usages.add())
        return report

    def apply(self, response, now):
        """`onQuotaResponseImpl` at `now`."""
        for action in response.bucket_action:
            if not action.HasField("bucket_id") or not action.bucket_id.bucket:
                self.events.append((now, None, "skip", "no bucket id"))
                continue
            key = bucket_key(action.bucket_id)
            cached = self.buckets.get(key)
            if cached is None:
                self.events.append((now, key, "skip", "unknown bucket"))
                continue
            limiter = None
            if action.HasField("quota_assignment_action"):
                strategy = action.quota_assignment_action.rate_limit_strategy
                kind = strategy.WhichOneof("strategy")
                if kind == "token_bucket":
                    old = self._strategy(cached) if cached.action is not None else None
                    if (old is not None and old.WhichOneof("strategy") == "token_bucket"
                            and same_token_bucket(strategy.token_bucket, old.token_bucket)):
                        limiter = cached.limiter
                    else:
                        limiter = token_bucket_from_strategy(strategy, now, cached.limiter)
                elif kind != "blanket_rule":
                    self.events.append((now, key, "skip", kind or "no strategy"))
                    continue
                detail = strategy
            elif action.HasField("abandon_action"):
                del self.buckets[key]
                self.events.append((now, key, "abandon", None))
                continue
            else:
                detail = None
            # A new CachedBucket: the usage carries over, the action, limiter and timer not.
            cached.action = action
            cached.limiter = limiter
            ttl = action.quota_assignment_action.assignment_time_to_live.seconds
            cached.expires = now + ttl
            self.events.append((now, key, "assign", detail))

    def next_expiry(self):
        """The earliest expiry deadline of an assigned action, or None."""
        deadlines = [b.expires for b in self.buckets.values() if b.expires is not None]
        return min(deadlines) if deadlines else None

    def expire(self, now):
        """`onActionExpirationTimer` for every action due by `now` (no expired-assignment
        fallback configured: back to the default, the limiter dropped)."""
        for key, bucket in self.buckets.items():
            if bucket.expires is not None and bucket.expires <= now:
                bucket.action = None
                bucket.limiter = None
                bucket.expires = None
                self.events.append((now, key, "expire", None))
