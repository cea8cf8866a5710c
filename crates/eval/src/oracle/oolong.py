# The oracle's code for OOLONG items (rlm-eval, src/oracle/oolong.rs): the rows of a
# window's text, each question type answered over them. Labels are not in the context:
# an instance is classified by its wording (a wh-word rule), which is right on the
# tests' files, not on TREC as a whole. Python's standard library only.
import datetime
import re
from collections import Counter

MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August',
          'September', 'October', 'November', 'December']


def label_of(text):
    low = text.strip().lower()
    if 'stand for' in low or 'abbreviation' in low:
        return 'abbreviation'
    if low.startswith('who'):
        return 'human being'
    if low.startswith('where'):
        return 'location'
    if low.startswith(('how many', 'how much', 'when', 'what year')):
        return 'numeric value'
    if low.startswith(('why', 'how ')):
        return 'description and abstract concept'
    return 'entity'


rows = []
for line in context.splitlines():
    m = re.match(r'Date: (\w{3} \d{2}, \d{4}) \|\| User: (\d+) \|\| Instance: (.*)$', line)
    if m:
        day = datetime.datetime.strptime(m.group(1), '%b %d, %Y').date()
        rows.append((day, int(m.group(2)), label_of(m.group(3))))


def scope(kind, arg):
    if kind == 'users':
        return [r for r in rows if r[1] in arg]
    if kind == 'month':
        return [r for r in rows if r[0].month == arg]
    if kind == 'range':
        low, high = [datetime.date.fromisoformat(d) for d in arg]
        return [r for r in rows if low <= r[0] <= high]
    return rows


def ranked(keys):
    return sorted(Counter(keys).items(), key=lambda kv: -kv[1])


def most_common(rs, labels):
    counts = Counter(r[2] for r in rs)
    return 'Label: ' + max(labels, key=lambda l: (counts[l], -labels.index(l)))


def least_common(rs, labels):
    counts = Counter(r[2] for r in rs)
    return 'Label: ' + min(labels, key=lambda l: (counts[l], labels.index(l)))


def compare(rs, a, b):
    counts = Counter(r[2] for r in rs)
    if counts[a] > counts[b]:
        return 'Answer: more common than'
    if counts[a] < counts[b]:
        return 'Answer: less common than'
    return 'Answer: same frequency as'


def count(rs, label):
    return 'Answer: %d' % sum(1 for r in rs if r[2] == label)


def top_user(rs, rank):
    return 'User: %d' % ranked(r[1] for r in rs)[rank][0]


def user_most_of(rs, label):
    return 'User: %d' % ranked(r[1] for r in rs if r[2] == label)[0][0]


def user_more_of(rs, label, a, b):
    of = lambda u: sum(1 for r in rs if r[1] == u and r[2] == label)
    return 'User: %d' % (a if of(a) >= of(b) else b)


def top_date(rs, rank):
    return 'Date: ' + ranked(r[0] for r in rs)[rank][0].strftime('%m/%d/%Y')


def dates_exactly(rs, n):
    return 'Answer: %d' % sum(1 for c in Counter(r[0] for r in rs).values() if c == n)


def before_after(rs, label, day):
    day = datetime.date.fromisoformat(day)
    before = [r for r in rs if r[0] < day]
    after = [r for r in rs if r[0] > day]
    b = sum(1 for r in before if r[2] == label) * len(after)
    a = sum(1 for r in after if r[2] == label) * len(before)
    return 'Answer: ' + ('more common' if b > a else 'less common' if b < a else 'the same frequency')


def by_month(rs):
    months = {}
    for r in sorted(rs, key=lambda r: r[0]):
        months.setdefault((r[0].year, r[0].month), Counter())[r[2]] += 1
    return months


def first_month(rs, a, b):
    for (year, month), counts in by_month(rs).items():
        if counts[a] > counts[b]:
            return 'Answer: %s %d' % (MONTHS[month - 1], year)
    return 'Answer: none'


def months_more(rs, a, b):
    return 'Answer: %d' % sum(1 for c in by_month(rs).values() if c[a] > c[b])


def months_single_most(rs, label):
    return 'Answer: %d' % sum(
        1 for c in by_month(rs).values() if all(n < c[label] for l, n in c.items() if l != label))
