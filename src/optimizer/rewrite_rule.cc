#include "optimizer/rewrite_rule.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

namespace inferd {
namespace {

// Op type → the indices of the rules that target it, ascending.
using RulesByType = std::unordered_map<std::string, std::vector<size_t>>;

RulesByType IndexRules(const std::vector<const RewriteRule*>& rules) {
  RulesByType by_type;
  for (size_t i = 0; i < rules.size(); ++i) {
    for (const std::string& type : rules[i]->TargetOpTypes()) {
      std::vector<size_t>& list = by_type[type];
      if (list.empty() || list.back() != i) list.push_back(i);
    }
  }
  return by_type;
}

// Offers `node` to each rule targeting its op type in list order. The op type is looked up
// again after every rewrite: a rule that turns its anchor into another target type hands it on to
// the later rules for that type, as separate sweeps in list order would.
void OfferNode(GraphEditor& ed, const std::vector<const RewriteRule*>& rules,
               const RulesByType& by_type, Node* node, std::vector<int>* fired) {
  size_t next = 0;  // the rules before `next` have had their turn at this node
  while (!ed.IsRemoved(node)) {
    auto it = by_type.find(node->op_type);
    if (it == by_type.end()) return;
    auto r = std::lower_bound(it->second.begin(), it->second.end(), next);
    if (r == it->second.end()) return;
    const RewriteRule& rule = *rules[*r];
    if (rule.Match(ed, *node) && rule.Rewrite(ed, node)) {
      ++(*fired)[*r];
      if (rule.RepeatOnAnchor()) continue;
    }
    next = *r + 1;
  }
}

}  // namespace

void SweepRules(GraphEditor& ed, const std::vector<const RewriteRule*>& rules,
                std::vector<int>* fired) {
  if (fired->size() < rules.size()) fired->resize(rules.size(), 0);
  const RulesByType by_type = IndexRules(rules);
  for (Node* node : ed.Nodes()) OfferNode(ed, rules, by_type, node, fired);
}

RuleSweep::RuleSweep(std::string name, std::vector<std::unique_ptr<RewriteRule>> rules)
    : name_(std::move(name)), rules_(std::move(rules)) {}

std::vector<std::string_view> RuleSweep::CountedNames() const {
  std::vector<std::string_view> names;
  for (const auto& rule : rules_) names.push_back(rule->Name());
  return names;
}

StatusOr<std::vector<int>> RuleSweep::RunCounted(Graph& graph) const {
  GraphEditor ed(graph);
  std::vector<const RewriteRule*> rules;
  for (const auto& rule : rules_) rules.push_back(rule.get());
  std::vector<int> fired(rules.size(), 0);
  SweepRules(ed, rules, &fired);
  RETURN_IF_ERROR(ed.Commit());
  return fired;
}

StatusOr<int> RuleSweep::Run(Graph& graph) const {
  ASSIGN_OR_RETURN(std::vector<int> fired, RunCounted(graph));
  return std::accumulate(fired.begin(), fired.end(), 0);
}

std::unique_ptr<GraphPass> MakeRuleSweep(std::unique_ptr<RewriteRule> rule) {
  std::string name(rule->Name());
  std::vector<std::unique_ptr<RewriteRule>> rules;
  rules.push_back(std::move(rule));
  return std::make_unique<RuleSweep>(std::move(name), std::move(rules));
}

std::unique_ptr<GraphPass> MakeRuleSweep(std::string name,
                                         std::vector<std::unique_ptr<RewriteRule>> rules) {
  return std::make_unique<RuleSweep>(std::move(name), std::move(rules));
}

}  // namespace inferd
