#include "batchjob/progress.h"

#include <sstream>

#include <gtest/gtest.h>

#include "batchjob/job.h"
#include "batchjob/timeline.h"
#include "testing/fake_clock.h"

namespace inferd::batchjob {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ProgressTest, FormatsBarRateAndEta) {
  ProgressState s;
  s.done = 600;  // 100 done before a resume
  s.total = 1000;
  s.run_done = 500;
  s.errors = 2;
  s.elapsed_s = 10;
  EXPECT_EQ(FormatBar(s, 10), "[######....] 600/1000 60% 50.0 items/s ETA 0:08, 2 errors");
  EXPECT_EQ(FormatPlainLine(s), "progress: 600/1000 (60%), 50.0 items/s, ETA 0:08, 2 errors");
  s.errors = 0;
  s.run_done = 0;
  EXPECT_EQ(FormatPlainLine(s), "progress: 600/1000 (60%), 0.0 items/s, ETA ?");
  EXPECT_EQ(FormatDuration(3725), "1:02:05");
  EXPECT_EQ(FormatDuration(59.6), "1:00");
  EXPECT_EQ(FormatDuration(-1), "?");
}

TEST(ProgressTest, PlainLinesComeAtTheIntervalOnTheFakeClock) {
  FakeClock clock;
  std::ostringstream out;
  Progress p(clock, out, /*tty=*/false, 100, 0, seconds(5));
  clock.Advance(seconds(1));
  p.Update(10, 0);
  EXPECT_EQ(out.str(), "");  // not due yet
  clock.Advance(seconds(4));
  p.Update(50, 1);
  EXPECT_EQ(out.str(), "progress: 50/100 (50%), 10.0 items/s, ETA 0:05, 1 error\n");
  clock.Advance(seconds(1));
  p.Update(60, 1);
  EXPECT_EQ(out.str(), "progress: 50/100 (50%), 10.0 items/s, ETA 0:05, 1 error\n");
  clock.Advance(seconds(4));
  p.Finish(100, 1);
  EXPECT_NE(out.str().find("progress: 100/100 (100%), 10.0 items/s, ETA 0:00, 1 error\n"),
            std::string::npos);
}

TEST(ProgressTest, TerminalBarRedrawsInPlaceAtMostEvery100ms) {
  FakeClock clock;
  std::ostringstream out;
  Progress p(clock, out, /*tty=*/true, 10, 0);
  clock.Advance(milliseconds(50));
  p.Update(1, 0);
  EXPECT_EQ(out.str(), "");
  clock.Advance(milliseconds(50));
  p.Update(2, 0);
  EXPECT_EQ(out.str().rfind("\r[", 0), 0u);
  EXPECT_NE(out.str().find("2/10 20%"), std::string::npos);
  p.Finish(10, 0);
  EXPECT_EQ(out.str().back(), '\n');
}

TEST(JobSummaryTest, GroupsAnswersIntoBatchesPerThread) {
  FakeClock clock;
  auto t0 = clock.Now();
  auto at = [&](int ms) { return t0 + milliseconds(ms); };
  std::vector<Completion> c = {
      {0, at(0), at(100)}, {0, at(1), at(100)}, {0, at(2), at(101)},  // batch 1: 0..100
      {0, at(3), at(200)}, {0, at(150), at(200)},                     // batch 2: 150..200
      {1, at(5), at(120)},                                            // other thread
  };
  auto batches = GroupBatches(c, std::chrono::microseconds(2000));
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].items, 3);
  EXPECT_EQ(batches[0].start, at(2));
  EXPECT_EQ(batches[0].end, at(100));
  EXPECT_EQ(batches[1].items, 2);
  EXPECT_EQ(batches[1].start, at(150));
  EXPECT_EQ(batches[1].end, at(200));
  EXPECT_EQ(batches[2].thread, 1u);
  EXPECT_EQ(batches[2].start, at(5));
}

TEST(JobSummaryTest, SummaryNamesItemsErrorsRateAndUtilization) {
  JobSummary s;
  s.records = 100;
  s.errors = 3;
  s.seconds = 4;
  s.reader_threads = 2;
  s.reader_busy = 0.25;
  s.engine_threads = 1;
  s.engine_busy = 0.9;
  s.writer_busy = 0.05;
  s.models.push_back({"m", 10, 97, 3.6});
  std::string text = FormatSummary(s);
  EXPECT_NE(text.find("100 records (3 errors) in 4.00 s: 25.0 items/s"), std::string::npos);
  EXPECT_NE(text.find("readers 25% (2 threads), engine 90% (busiest model), writer 5%"),
            std::string::npos);
  EXPECT_NE(text.find("model m: 10 batches, 97 items (mean batch 9.7), compute 3.60 s (90% busy)"),
            std::string::npos);
  EXPECT_NE(SummaryJson(s).find("\"items_per_s\":25.000"), std::string::npos);
}

TEST(TimelineTest, SvgHasALanePerStageAndARectPerSpan) {
  FakeClock clock;
  Timeline timeline(clock.Now());
  auto t0 = clock.Now();
  timeline.Add("writer", t0 + milliseconds(900), t0 + seconds(1), "3 records");
  timeline.Add("reader 0", t0, t0 + milliseconds(100), "a<b>.jpg");
  timeline.Add("engine 0", t0 + milliseconds(100), t0 + milliseconds(900), "batch of 3");
  timeline.Add("reader 1", t0, t0 + milliseconds(200), "c.jpg");
  std::string svg = timeline.RenderSvg("job & test");
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("job &amp; test"), std::string::npos);
  EXPECT_NE(svg.find("a&lt;b&gt;.jpg"), std::string::npos);
  size_t rects = 0;
  for (size_t p = svg.find("<title>"); p != std::string::npos; p = svg.find("<title>", p + 1)) {
    ++rects;
  }
  EXPECT_EQ(rects, 4u);
  // Pipeline order, whatever order the spans came in.
  EXPECT_LT(svg.find(">reader 0<"), svg.find(">reader 1<"));
  EXPECT_LT(svg.find(">reader 1<"), svg.find(">engine 0<"));
  EXPECT_LT(svg.find(">engine 0<"), svg.find(">writer<"));
}

TEST(TimelineTest, SpansOverTheLimitAreCountedNotKept) {
  FakeClock clock;
  Timeline timeline(clock.Now(), /*max_spans=*/2);
  for (int i = 0; i < 5; ++i) timeline.Add("reader 0", clock.Now(), clock.Now(), "x");
  EXPECT_EQ(timeline.Spans().size(), 2u);
  EXPECT_NE(timeline.RenderSvg("t").find("3 later spans not drawn"), std::string::npos);
}

}  // namespace
}  // namespace inferd::batchjob
