//! Sinks that a recording thread drives to the end ([`Recording`]), and how two of them take the
//! same messages ([`Both`]), or none ([`Option`]): a run writes a bag, serves a live view, both,
//! or neither, through one set of topics.

use super::sink::{Sink, SinkError, TopicId, TopicSpec};

/// A sink that a recording thread flushes now and then and finishes when the run ends.
pub trait Recording: Sink + Send + 'static {
    /// What the finished sink reports (a bag's statistics, say).
    type Finished: Send + std::fmt::Debug + 'static;

    /// Makes what was written so far readable (a bag's checkpoint), about once a second.
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }

    fn finish(self) -> Result<Self::Finished, SinkError>;

    /// Where the messages go, for log lines.
    fn describe(&self) -> String;
}

/// Two sinks that take every topic and message.
#[derive(Debug)]
pub struct Both<A, B> {
    pub first: A,
    pub second: B,
    /// Each topic's id in `first` and in `second`.
    ids: Vec<(TopicId, TopicId)>,
}

impl<A, B> Both<A, B> {
    pub fn new(first: A, second: B) -> Both<A, B> {
        Both { first, second, ids: Vec::new() }
    }
}

impl<A: Sink, B: Sink> Sink for Both<A, B> {
    fn advertise(&mut self, topic: &TopicSpec<'_>) -> Result<TopicId, SinkError> {
        let ids = (self.first.advertise(topic)?, self.second.advertise(topic)?);
        self.ids.push(ids);
        Ok(TopicId(self.ids.len() - 1))
    }

    fn write(&mut self, topic: TopicId, time_ns: u64, cdr: &[u8]) -> Result<(), SinkError> {
        let &(first, second) = self.ids.get(topic.0).ok_or(SinkError::UnknownTopic(topic))?;
        self.first.write(first, time_ns, cdr)?;
        self.second.write(second, time_ns, cdr)
    }
}

impl<A: Recording, B: Recording> Recording for Both<A, B> {
    type Finished = (A::Finished, B::Finished);

    fn flush(&mut self) -> Result<(), SinkError> {
        self.first.flush()?;
        self.second.flush()
    }

    /// Finishes both, the second even when the first fails.
    fn finish(self) -> Result<Self::Finished, SinkError> {
        let first = self.first.finish();
        let second = self.second.finish();
        Ok((first?, second?))
    }

    fn describe(&self) -> String {
        format!("{} and {}", self.first.describe(), self.second.describe())
    }
}

/// No sink: every topic is taken, every message dropped.
impl<S: Sink> Sink for Option<S> {
    fn advertise(&mut self, topic: &TopicSpec<'_>) -> Result<TopicId, SinkError> {
        match self {
            Some(sink) => sink.advertise(topic),
            None => Ok(TopicId(0)),
        }
    }

    fn write(&mut self, topic: TopicId, time_ns: u64, cdr: &[u8]) -> Result<(), SinkError> {
        match self {
            Some(sink) => sink.write(topic, time_ns, cdr),
            None => Ok(()),
        }
    }
}

impl<S: Recording> Recording for Option<S> {
    type Finished = Option<S::Finished>;

    fn flush(&mut self) -> Result<(), SinkError> {
        self.as_mut().map_or(Ok(()), Recording::flush)
    }

    fn finish(self) -> Result<Self::Finished, SinkError> {
        self.map(Recording::finish).transpose()
    }

    fn describe(&self) -> String {
        self.as_ref().map_or_else(|| "nowhere".to_owned(), Recording::describe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::StringMsg;
    use crate::outputs::{NodeName, Outputs, Qos};

    /// What a sink was told: topic names, and (topic, time, bytes) written.
    #[derive(Debug, Default)]
    struct Seen {
        topics: Vec<String>,
        written: Vec<(TopicId, u64, Vec<u8>)>,
    }

    impl Sink for Seen {
        fn advertise(&mut self, topic: &TopicSpec<'_>) -> Result<TopicId, SinkError> {
            self.topics.push(topic.resolved.to_owned());
            Ok(TopicId(self.topics.len() - 1))
        }

        fn write(&mut self, topic: TopicId, time_ns: u64, cdr: &[u8]) -> Result<(), SinkError> {
            self.written.push((topic, time_ns, cdr.to_vec()));
            Ok(())
        }
    }

    #[test]
    fn both_sinks_get_every_topic_and_message_under_their_own_ids() {
        // The second sink already knows a topic, so its ids differ from the first's.
        let mut second = Seen::default();
        second.topics.push("/earlier".into());
        let mut out = Outputs::new(NodeName::new("node"), Both::new(Seen::default(), second));
        let a = out.topic::<StringMsg>("~/a", Qos::STREAM).unwrap();
        let b = out.topic::<StringMsg>("/b", Qos::LATCHED).unwrap();
        out.publish(b, 7, &StringMsg { data: "x".into() }).unwrap();
        out.publish(a, 8, &StringMsg { data: "y".into() }).unwrap();
        let both = out.into_sink();
        assert_eq!(both.first.topics, ["/node/a", "/b"]);
        assert_eq!(both.second.topics, ["/earlier", "/node/a", "/b"]);
        let ids = |seen: &Seen| seen.written.iter().map(|(id, t, _)| (id.0, *t)).collect::<Vec<_>>();
        assert_eq!(ids(&both.first), [(1, 7), (0, 8)]);
        assert_eq!(ids(&both.second), [(2, 7), (1, 8)]);
        assert_eq!(both.first.written[0].2, both.second.written[0].2, "the same bytes");
    }

    #[test]
    fn no_sink_takes_every_topic_and_drops_every_message() {
        let mut out = Outputs::new(NodeName::new("node"), None::<Seen>);
        let topic = out.topic::<StringMsg>("~/a", Qos::STREAM).unwrap();
        out.publish(topic, 1, &StringMsg { data: "x".into() }).unwrap();
        assert!(out.into_sink().is_none());
    }
}
