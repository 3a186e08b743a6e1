"""Flink's own wording, release by release: exception messages, log lines and enrichment hints, with the versions
each one holds for, and the fully qualified names of the exception classes people paste without their package.

Taken from each release's classes where a distribution is at hand (``javap -c -constants`` on ``flink-dist`` of the
PyPI ``apache-flink`` 1.9.3 and ``apache-flink-libraries`` 1.20.3, the literal parts re-checked in the
constant pools of 1.17.2 and 2.3.0; the oldest on PyPI is 1.9.3), and for older
releases from the wording their logs show (the ``versions`` of those say where the text was seen, not proven by a
jar). Each :class:`Wording` carries an example line exactly as that release prints it; the tests
match every pattern against its example, so a pattern and the text it is meant for cannot drift apart.

Patterns use the regex subset Java, Python and RE2 share (they run on the Spark workers as pre-filter signatures).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Wording:
    runbook: str  # the runbook this wording is evidence for
    pattern: str  # regex (shared subset) matching the wording
    versions: str  # Flink releases that print it, e.g. "1.3 – 1.8"
    source: str  # the class (and constant) the text comes from
    example: str  # a line as the release prints it


# Exception classes by simple name, for excerpts that drop the package ("RemoteTransportException: ...").
# Flink's own from flink-dist 1.9.3 and 1.20.3 (top-level classes named *Exception/*Error), then older Flink classes
# and the JDK / client-library classes the catalogue's runbooks read.
FLINK_CLASSES = {
    "AkkaHandshakeException": "org.apache.flink.runtime.rpc.akka.exceptions.AkkaHandshakeException",
    "AkkaRpcException": "org.apache.flink.runtime.rpc.akka.exceptions.AkkaRpcException",
    "AkkaRpcInvalidStateException": "org.apache.flink.runtime.rpc.akka.exceptions.AkkaRpcInvalidStateException",
    "AkkaUnknownMessageException": "org.apache.flink.runtime.rpc.akka.exceptions.AkkaUnknownMessageException",
    "ApplicationExecutionException": "org.apache.flink.client.deployment.application.ApplicationExecutionException",
    "AsyncStateException": "org.apache.flink.runtime.asyncprocessing.AsyncStateException",
    "AsynchronousException": "org.apache.flink.runtime.taskmanager.AsynchronousException",
    "BackendBuildingException": "org.apache.flink.runtime.state.BackendBuildingException",
    "BadRequestException": "org.apache.flink.queryablestate.network.BadRequestException",
    "BiConsumerWithException": "org.apache.flink.util.function.BiConsumerWithException",
    "BiFunctionWithException": "org.apache.flink.util.function.BiFunctionWithException",
    "BufferCompressionException": "org.apache.flink.runtime.io.compression.BufferCompressionException",
    "BufferDecompressionException": "org.apache.flink.runtime.io.compression.BufferDecompressionException",
    "CancelTaskException": "org.apache.flink.runtime.execution.CancelTaskException",
    "CheckpointException": "org.apache.flink.runtime.checkpoint.CheckpointException",
    "CliArgsException": "org.apache.flink.client.cli.CliArgsException",
    "ClusterDatasetCorruptedException": "org.apache.flink.runtime.scheduler.ClusterDatasetCorruptedException",
    "ClusterDeploymentException": "org.apache.flink.client.deployment.ClusterDeploymentException",
    "ClusterEntrypointException": "org.apache.flink.runtime.entrypoint.ClusterEntrypointException",
    "ClusterRetrieveException": "org.apache.flink.client.deployment.ClusterRetrieveException",
    "CompilerException": "org.apache.flink.optimizer.CompilerException",
    "CompilerPostPassException": "org.apache.flink.optimizer.CompilerPostPassException",
    "ConfigurationException": "org.apache.flink.util.ConfigurationException",
    "ConflictingFieldTypeInfoException": "org.apache.flink.optimizer.postpass.ConflictingFieldTypeInfoException",
    "ConnectionClosedException": "org.apache.flink.runtime.rest.ConnectionClosedException",
    "ConnectionException": "org.apache.flink.runtime.rest.ConnectionException",
    "ConnectionIdleException": "org.apache.flink.runtime.rest.ConnectionIdleException",
    "ConversionException": "org.apache.flink.runtime.rest.messages.ConversionException",
    "CorruptConfigurationException": "org.apache.flink.runtime.operators.util.CorruptConfigurationException",
    "DeserializationException": "org.apache.flink.types.DeserializationException",
    "DispatcherException": "org.apache.flink.runtime.dispatcher.DispatcherException",
    "DuplicateJobSubmissionException": "org.apache.flink.runtime.client.DuplicateJobSubmissionException",
    "DynamicCodeLoadingException": "org.apache.flink.util.DynamicCodeLoadingException",
    "EndpointNotStartedException": "org.apache.flink.runtime.rpc.exceptions.EndpointNotStartedException",
    "Error": "org.apache.flink.mesos.scheduler.messages.Error",
    "ExceptionInChainedOperatorException": "org.apache.flink.streaming.runtime.tasks.ExceptionInChainedOperatorException",
    "ExceptionInChainedStubException": "org.apache.flink.runtime.operators.chaining.ExceptionInChainedStubException",
    "ExecutionGraphException": "org.apache.flink.runtime.executiongraph.ExecutionGraphException",
    "FencingTokenException": "org.apache.flink.runtime.rpc.exceptions.FencingTokenException",
    "FlinkException": "org.apache.flink.util.FlinkException",
    "FlinkExpectedException": "org.apache.flink.util.FlinkExpectedException",
    "FlinkJobNotFoundException": "org.apache.flink.runtime.messages.FlinkJobNotFoundException",
    "FlinkJobTerminatedWithoutCancellationException": "org.apache.flink.runtime.messages.FlinkJobTerminatedWithoutCancellationException",
    "FlinkParseException": "org.apache.flink.runtime.entrypoint.FlinkParseException",
    "FlinkRuntimeException": "org.apache.flink.util.FlinkRuntimeException",
    "FunctionWithException": "org.apache.flink.util.function.FunctionWithException",
    "FutureConsumerWithException": "org.apache.flink.util.concurrent.FutureConsumerWithException",
    "FutureTaskWithException": "org.apache.flink.util.function.FutureTaskWithException",
    "HandlerRequestException": "org.apache.flink.runtime.rest.handler.HandlerRequestException",
    "HandshakeException": "org.apache.flink.runtime.rpc.exceptions.HandshakeException",
    "IllegalConfigurationException": "org.apache.flink.configuration.IllegalConfigurationException",
    "IllegalExecutionStateException": "org.apache.flink.runtime.executiongraph.IllegalExecutionStateException",
    "IllegalRedistributionModeException": "org.apache.flink.api.common.state.IllegalRedistributionModeException",
    "InitializationTypeConflictException": "org.apache.flink.runtime.broadcast.InitializationTypeConflictException",
    "InputSplitProviderException": "org.apache.flink.runtime.jobgraph.tasks.InputSplitProviderException",
    "InstanceDiedException": "org.apache.flink.runtime.instance.InstanceDiedException",
    "InvalidProgramException": "org.apache.flink.api.common.InvalidProgramException",
    "InvalidTypesException": "org.apache.flink.api.common.functions.InvalidTypesException",
    "JobAlreadyDoneException": "org.apache.flink.runtime.jobmaster.JobAlreadyDoneException",
    "JobCancellationException": "org.apache.flink.runtime.client.JobCancellationException",
    "JobCancellationFailedException": "org.apache.flink.runtime.dispatcher.JobCancellationFailedException",
    "JobException": "org.apache.flink.runtime.JobException",
    "JobExecutionException": "org.apache.flink.runtime.client.JobExecutionException",
    "JobInitializationException": "org.apache.flink.runtime.client.JobInitializationException",
    "JobManagerException": "org.apache.flink.runtime.jobmaster.JobManagerException",
    "JobMasterException": "org.apache.flink.runtime.jobmaster.JobMasterException",
    "JobModificationException": "org.apache.flink.runtime.jobmaster.exceptions.JobModificationException",
    "JobNotFinishedException": "org.apache.flink.runtime.jobmaster.JobNotFinishedException",
    "JobRetrievalException": "org.apache.flink.runtime.client.JobRetrievalException",
    "JobSubmissionException": "org.apache.flink.runtime.client.JobSubmissionException",
    "JobTimeoutException": "org.apache.flink.runtime.client.JobTimeoutException",
    "KeyFieldOutOfBoundsException": "org.apache.flink.types.KeyFieldOutOfBoundsException",
    "KubernetesException": "org.apache.flink.kubernetes.kubeclient.resources.KubernetesException",
    "KubernetesTooOldResourceVersionException": "org.apache.flink.kubernetes.kubeclient.resources.KubernetesTooOldResourceVersionException",
    "LeaderElectionException": "org.apache.flink.runtime.leaderelection.LeaderElectionException",
    "LeaderIdMismatchException": "org.apache.flink.runtime.highavailability.LeaderIdMismatchException",
    "LeaderRetrievalException": "org.apache.flink.runtime.leaderretrieval.LeaderRetrievalException",
    "LeadershipLostException": "org.apache.flink.runtime.leaderelection.LeadershipLostException",
    "LocalTransportException": "org.apache.flink.runtime.io.network.netty.exception.LocalTransportException",
    "LongFunctionWithException": "org.apache.flink.util.function.LongFunctionWithException",
    "MaterializationExpiredException": "org.apache.flink.runtime.broadcast.MaterializationExpiredException",
    "MemoryAllocationException": "org.apache.flink.runtime.memory.MemoryAllocationException",
    "MemoryReservationException": "org.apache.flink.runtime.memory.MemoryReservationException",
    "MissingFieldTypeInfoException": "org.apache.flink.optimizer.postpass.MissingFieldTypeInfoException",
    "MutatedConfigurationException": "org.apache.flink.client.program.MutatedConfigurationException",
    "NoMatchSecurityFactoryException": "org.apache.flink.runtime.security.NoMatchSecurityFactoryException",
    "NoResourceAvailableException": "org.apache.flink.runtime.jobmanager.scheduler.NoResourceAvailableException",
    "NonSerializableUserCodeException": "org.apache.flink.api.common.NonSerializableUserCodeException",
    "NotFoundException": "org.apache.flink.runtime.rest.NotFoundException",
    "NullFieldException": "org.apache.flink.types.NullFieldException",
    "NullKeyFieldException": "org.apache.flink.types.NullKeyFieldException",
    "OperationAlreadyFailedException": "org.apache.flink.runtime.dispatcher.OperationAlreadyFailedException",
    "ParseException": "org.apache.flink.api.common.io.ParseException",
    "PartitionConnectionException": "org.apache.flink.runtime.io.network.partition.consumer.PartitionConnectionException",
    "PartitionException": "org.apache.flink.runtime.io.network.partition.PartitionException",
    "PartitionNotFoundException": "org.apache.flink.runtime.io.network.partition.PartitionNotFoundException",
    "PartitionProducerDisposedException": "org.apache.flink.runtime.jobmanager.PartitionProducerDisposedException",
    "PartitionUpdateException": "org.apache.flink.runtime.taskexecutor.exceptions.PartitionUpdateException",
    "PossibleInconsistentStateException": "org.apache.flink.runtime.persistence.PossibleInconsistentStateException",
    "ProducerFailedException": "org.apache.flink.runtime.io.network.partition.ProducerFailedException",
    "ProgramAbortException": "org.apache.flink.client.program.ProgramAbortException",
    "ProgramInvocationException": "org.apache.flink.client.program.ProgramInvocationException",
    "ProgramMissingJobException": "org.apache.flink.client.program.ProgramMissingJobException",
    "ProgramParametrizationException": "org.apache.flink.client.program.ProgramParametrizationException",
    "RecipientUnreachableException": "org.apache.flink.runtime.rpc.exceptions.RecipientUnreachableException",
    "RegistrationTimeoutException": "org.apache.flink.runtime.taskexecutor.exceptions.RegistrationTimeoutException",
    "RemoteTransportException": "org.apache.flink.runtime.io.network.netty.exception.RemoteTransportException",
    "RequiredParametersException": "org.apache.flink.api.java.utils.RequiredParametersException",
    "ResourceManagerException": "org.apache.flink.runtime.resourcemanager.exceptions.ResourceManagerException",
    "RestClientException": "org.apache.flink.runtime.rest.util.RestClientException",
    "RestHandlerException": "org.apache.flink.runtime.rest.handler.RestHandlerException",
    "ReturnStatementInClosureException": "org.apache.flink.api.scala.ReturnStatementInClosureException",
    "RpcConnectionException": "org.apache.flink.runtime.rpc.exceptions.RpcConnectionException",
    "RpcException": "org.apache.flink.runtime.rpc.exceptions.RpcException",
    "RpcLoaderException": "org.apache.flink.runtime.rpc.exceptions.RpcLoaderException",
    "RpcRuntimeException": "org.apache.flink.runtime.rpc.exceptions.RpcRuntimeException",
    "RunnableWithException": "org.apache.flink.util.function.RunnableWithException",
    "SecurityContextInitializeException": "org.apache.flink.runtime.security.SecurityContextInitializeException",
    "SerializableSupplierWithException": "org.apache.flink.util.function.SerializableSupplierWithException",
    "SerializedCheckpointException": "org.apache.flink.runtime.messages.checkpoint.SerializedCheckpointException",
    "SharedSlotOversubscribedException": "org.apache.flink.runtime.jobmaster.slotpool.SharedSlotOversubscribedException",
    "SlotAllocationException": "org.apache.flink.runtime.taskexecutor.exceptions.SlotAllocationException",
    "SlotManagerException": "org.apache.flink.runtime.resourcemanager.slotmanager.SlotManagerException",
    "SlotNotActiveException": "org.apache.flink.runtime.taskexecutor.slot.SlotNotActiveException",
    "SlotNotFoundException": "org.apache.flink.runtime.taskexecutor.slot.SlotNotFoundException",
    "SlotOccupiedException": "org.apache.flink.runtime.taskexecutor.exceptions.SlotOccupiedException",
    "StateMigrationException": "org.apache.flink.util.StateMigrationException",
    "StopWithSavepointStoppingException": "org.apache.flink.runtime.scheduler.stopwithsavepoint.StopWithSavepointStoppingException",
    "StreamTaskException": "org.apache.flink.streaming.runtime.tasks.StreamTaskException",
    "SupplierWithException": "org.apache.flink.util.function.SupplierWithException",
    "SuppressRestartsException": "org.apache.flink.runtime.execution.SuppressRestartsException",
    "TaskException": "org.apache.flink.runtime.taskexecutor.exceptions.TaskException",
    "TaskManagerException": "org.apache.flink.runtime.taskexecutor.exceptions.TaskManagerException",
    "TaskNotRunningException": "org.apache.flink.runtime.operators.coordination.TaskNotRunningException",
    "TaskSubmissionException": "org.apache.flink.runtime.taskexecutor.exceptions.TaskSubmissionException",
    "TimerException": "org.apache.flink.streaming.runtime.tasks.TimerException",
    "TransportException": "org.apache.flink.runtime.io.network.netty.exception.TransportException",
    "TraversableOnceException": "org.apache.flink.util.TraversableOnceException",
    "TriConsumerWithException": "org.apache.flink.util.function.TriConsumerWithException",
    "TriFunctionWithException": "org.apache.flink.util.function.TriFunctionWithException",
    "TypeExtractionException": "org.apache.flink.api.java.typeutils.TypeExtractionException",
    "UnavailableDispatcherOperationException": "org.apache.flink.runtime.dispatcher.UnavailableDispatcherOperationException",
    "UnfulfillableSlotRequestException": "org.apache.flink.runtime.resourcemanager.exceptions.UnfulfillableSlotRequestException",
    "UnknownKeyOrNamespaceException": "org.apache.flink.queryablestate.exceptions.UnknownKeyOrNamespaceException",
    "UnknownKvStateIdException": "org.apache.flink.queryablestate.exceptions.UnknownKvStateIdException",
    "UnknownKvStateKeyGroupLocationException": "org.apache.flink.queryablestate.exceptions.UnknownKvStateKeyGroupLocationException",
    "UnknownLocationException": "org.apache.flink.queryablestate.exceptions.UnknownLocationException",
    "UnknownOperationKeyException": "org.apache.flink.runtime.dispatcher.UnknownOperationKeyException",
    "UnknownTaskExecutorException": "org.apache.flink.runtime.resourcemanager.exceptions.UnknownTaskExecutorException",
    "UnsuccessfulExecutionException": "org.apache.flink.client.deployment.application.UnsuccessfulExecutionException",
    "UnsupportedAggregationTypeException": "org.apache.flink.api.java.aggregation.UnsupportedAggregationTypeException",
    "UnsupportedFileSystemSchemeException": "org.apache.flink.core.fs.UnsupportedFileSystemSchemeException",
    "UnsupportedTimeCharacteristicException": "org.apache.flink.streaming.api.datastream.UnsupportedTimeCharacteristicException",
    "UserSystemExitException": "org.apache.flink.core.security.UserSystemExitException",
    "VersionMismatchException": "org.apache.flink.core.io.VersionMismatchException",
    "WrappingRuntimeException": "org.apache.flink.util.WrappingRuntimeException",
}
OTHER_CLASSES = {
    "CheckpointDeclineTaskNotReadyException": "org.apache.flink.runtime.checkpoint.decline.CheckpointDeclineTaskNotReadyException",
    "CheckpointDeclineOnCancellationBarrierException": "org.apache.flink.runtime.checkpoint.decline.CheckpointDeclineOnCancellationBarrierException",
    "AlignmentLimitExceededException": "org.apache.flink.runtime.checkpoint.decline.AlignmentLimitExceededException",
    "FlinkKafkaException": "org.apache.flink.streaming.connectors.kafka.FlinkKafkaException",
    "FlinkKafka011Exception": "org.apache.flink.streaming.connectors.kafka.FlinkKafka011Exception",
    "SerializedThrowable": "org.apache.flink.util.SerializedThrowable",
    "OutOfMemoryError": "java.lang.OutOfMemoryError",
    "StackOverflowError": "java.lang.StackOverflowError",
    "NoClassDefFoundError": "java.lang.NoClassDefFoundError",
    "ClassNotFoundException": "java.lang.ClassNotFoundException",
    "NoSuchMethodError": "java.lang.NoSuchMethodError",
    "NullPointerException": "java.lang.NullPointerException",
    "IllegalStateException": "java.lang.IllegalStateException",
    "IllegalArgumentException": "java.lang.IllegalArgumentException",
    "ClassCastException": "java.lang.ClassCastException",
    "ArrayIndexOutOfBoundsException": "java.lang.ArrayIndexOutOfBoundsException",
    "IndexOutOfBoundsException": "java.lang.IndexOutOfBoundsException",
    "NumberFormatException": "java.lang.NumberFormatException",
    "UnsupportedOperationException": "java.lang.UnsupportedOperationException",
    "InterruptedException": "java.lang.InterruptedException",
    "RuntimeException": "java.lang.RuntimeException",
    "Exception": "java.lang.Exception",
    "IOException": "java.io.IOException",
    "FileNotFoundException": "java.io.FileNotFoundException",
    "UncheckedIOException": "java.io.UncheckedIOException",
    "EOFException": "java.io.EOFException",
    "ConnectException": "java.net.ConnectException",
    "SocketTimeoutException": "java.net.SocketTimeoutException",
    "UnknownHostException": "java.net.UnknownHostException",
    "SocketException": "java.net.SocketException",
    "AccessDeniedException": "java.nio.file.AccessDeniedException",
    "FileAlreadyExistsException": "java.nio.file.FileAlreadyExistsException",
    "NoSuchFileException": "java.nio.file.NoSuchFileException",
    "TimeoutException": "java.util.concurrent.TimeoutException",
    "ExecutionException": "java.util.concurrent.ExecutionException",
    "CompletionException": "java.util.concurrent.CompletionException",
    "CancellationException": "java.util.concurrent.CancellationException",
    "RocksDBException": "org.rocksdb.RocksDBException",
    "RemoteException": "org.apache.hadoop.ipc.RemoteException",
    "DSQuotaExceededException": "org.apache.hadoop.hdfs.protocol.DSQuotaExceededException",
    "AmazonS3Exception": "com.amazonaws.services.s3.model.AmazonS3Exception",
    "CommitFailedException": "org.apache.kafka.clients.consumer.CommitFailedException",
    "RetriableCommitFailedException": "org.apache.kafka.clients.consumer.RetriableCommitFailedException",
    "DisconnectException": "org.apache.kafka.common.errors.DisconnectException",
    "NetworkException": "org.apache.kafka.common.errors.NetworkException",
    "CoordinatorNotAvailableException": "org.apache.kafka.common.errors.CoordinatorNotAvailableException",
    "RecordTooLargeException": "org.apache.kafka.common.errors.RecordTooLargeException",
    "ProducerFencedException": "org.apache.kafka.common.errors.ProducerFencedException",
    "InvalidPidMappingException": "org.apache.kafka.common.errors.InvalidPidMappingException",
    "InvalidTxnStateException": "org.apache.kafka.common.errors.InvalidTxnStateException",
    "InvalidProducerEpochException": "org.apache.kafka.common.errors.InvalidProducerEpochException",
    "TransactionAbortedException": "org.apache.kafka.common.errors.TransactionAbortedException",
    "OutOfOrderSequenceException": "org.apache.kafka.common.errors.OutOfOrderSequenceException",
    "SaslAuthenticationException": "org.apache.kafka.common.errors.SaslAuthenticationException",
    "SslAuthenticationException": "org.apache.kafka.common.errors.SslAuthenticationException",
    "TopicAuthorizationException": "org.apache.kafka.common.errors.TopicAuthorizationException",
    "GroupAuthorizationException": "org.apache.kafka.common.errors.GroupAuthorizationException",
    "TransactionalIdAuthorizationException": "org.apache.kafka.common.errors.TransactionalIdAuthorizationException",
    "UnknownTopicOrPartitionException": "org.apache.kafka.common.errors.UnknownTopicOrPartitionException",
    "KafkaException": "org.apache.kafka.common.KafkaException",
    "KryoException": "com.esotericsoftware.kryo.KryoException",
    "InaccessibleObjectException": "java.lang.reflect.InaccessibleObjectException",
    "NotSerializableException": "java.io.NotSerializableException",
    "InvalidClassException": "java.io.InvalidClassException",
    "NoSuchFieldError": "java.lang.NoSuchFieldError",
    "LinkageError": "java.lang.LinkageError",
    "ExceptionInInitializerError": "java.lang.ExceptionInInitializerError",
    "UnsupportedClassVersionError": "java.lang.UnsupportedClassVersionError",
    "AvroRuntimeException": "org.apache.avro.AvroRuntimeException",
    "ValidationException": "org.apache.flink.table.api.ValidationException",
    "TableException": "org.apache.flink.table.api.TableException",
    "SqlParserException": "org.apache.flink.table.api.SqlParserException",
    "AskTimeoutException": "akka.pattern.AskTimeoutException",
    "OversizedPayloadException": "akka.remote.OversizedPayloadException",
    "KeeperException": "org.apache.zookeeper.KeeperException",
    "KubernetesClientException": "io.fabric8.kubernetes.client.KubernetesClientException",
}
KNOWN_CLASSES = {**FLINK_CLASSES, **OTHER_CLASSES}


def qualify(cls: str) -> str:
    """The fully qualified name of an exception class pasted without its package (unknown names stay as given)."""
    if "." in cls:
        return cls
    return KNOWN_CLASSES.get(cls, cls)


_TM_META = ("java.lang.OutOfMemoryError: Metaspace. The metaspace out-of-memory error has occurred. This can mean two "
            "things: either the job requires a larger size of JVM metaspace to load classes or there is a class loading "
            "leak. In the first case 'taskmanager.memory.jvm-metaspace.size' configuration option should be increased.")
_TM_DIRECT = ("java.lang.OutOfMemoryError: Direct buffer memory. The direct out-of-memory error has occurred. This can "
              "mean two things: either job(s) require(s) a larger size of JVM direct memory or there is a direct memory "
              "leak. The direct memory can be allocated by user code or some of its dependencies. In this case "
              "'taskmanager.memory.task.off-heap.size' configuration option should be increased.")

# Flink's wording of the failures the catalogue knows, per release range. Several runbooks share a wording when it
# is evidence for both; the detectors judge, these only recognise.
WORDINGS: tuple[Wording, ...] = (
    # -- checkpoint-declined-task-not-ready
    Wording("checkpoint-declined-task-not-ready", r"CheckpointDeclineTaskNotReadyException(?::\s*Task .+ was not running)?",
            "1.3 – 1.8", "o.a.f.runtime.checkpoint.decline.CheckpointDeclineTaskNotReadyException (Task#triggerCheckpointBarrier)",
            "org.apache.flink.runtime.checkpoint.decline.CheckpointDeclineTaskNotReadyException: Task Source: Custom Source (2/4) was not running"),
    Wording("checkpoint-declined-task-not-ready", r"Checkpoint triggering task .+ of job [0-9a-f]+ is not in state RUNNING but [A-Z]+ instead",
            "1.9 – 1.13", "CheckpointCoordinator#triggerCheckpoint (\"Checkpoint triggering task {} of job {} is not in state {} but {} instead. Aborting checkpoint.\")",
            "Checkpoint triggering task Source: Kafka (1/2) of job 0a4f2b7c9d1e3f5a6b8c0d2e4f6a8b0c is not in state RUNNING but DEPLOYING instead. Aborting checkpoint."),
    Wording("checkpoint-declined-task-not-ready", r"task .+ of job [0-9a-f]+ is not being executed at the moment\. Aborting checkpoint\.",
            "1.9 – 2.x", "CheckpointCoordinator up to 1.13, DefaultCheckpointPlanCalculator since 1.14 (\"Checkpoint triggering task %s of job %s is not being executed at the moment. Aborting checkpoint.\")",
            "Checkpoint triggering task Source: orders (1/2) of job 0a4f2b7c9d1e3f5a6b8c0d2e4f6a8b0c is not being executed at the moment. Aborting checkpoint. Failure reason: Not all required tasks are currently running."),
    Wording("checkpoint-declined-task-not-ready", r"Some tasks of the job have already finished and checkpointing with finished tasks is not enabled",
            "1.14 – 2.x", "DefaultCheckpointPlanCalculator (FLIP-147 switched off)",
            "Failed to trigger checkpoint for job 0a4f2b7c9d1e3f5a6b8c0d2e4f6a8b0c since Some tasks of the job have already finished and checkpointing with finished tasks is not enabled. Failure reason: Not all required tasks are currently running.."),
    Wording("checkpoint-declined-task-not-ready", r"Checkpoint was declined \(tasks not ready\)",
            "1.9 – 2.x", "CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_NOT_READY",
            "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint was declined (tasks not ready)"),
    # -- checkpoint-sync-phase-failure
    Wording("checkpoint-sync-phase-failure", r"Could not complete snapshot \d+ for operator .+",
            "1.3 – 2.x", "AbstractStreamOperator#snapshotState up to 1.10, StreamOperatorStateHandler#snapshotState since 1.11 (the CheckpointException's message; in 1.17.2 and 2.3.0 too)",
            "2019-03-21 09:14:02,551 INFO  org.apache.flink.streaming.api.operators.AbstractStreamOperator  - Could not complete snapshot 42 for operator Sink: kafka-out (3/4)."),
    Wording("checkpoint-sync-phase-failure", r"Could not perform checkpoint \d+ for operator .+",
            "1.4 – 2.x", "StreamTask#triggerCheckpointOnBarrier / performCheckpoint",
            "java.lang.Exception: Could not perform checkpoint 42 for operator Sink: kafka-out (3/4)."),
    Wording("checkpoint-sync-phase-failure", r"Task local checkpoint failure\.",
            "1.9 – 2.x", "CheckpointFailureReason.TASK_CHECKPOINT_FAILURE",
            "org.apache.flink.runtime.checkpoint.CheckpointException: Task local checkpoint failure."),
    # -- checkpoint-async-materialize-failure
    Wording("checkpoint-async-materialize-failure", r"Could not materialize checkpoint \d+ for operator .+",
            "1.3 – 2.x", "AsyncCheckpointRunnable (\"Could not materialize checkpoint \" + checkpointId + \" for operator \" + taskName + '.')",
            "java.lang.Exception: Could not materialize checkpoint 12 for operator KeyedProcess (2/4)."),
    Wording("checkpoint-async-materialize-failure", r"Asynchronous task checkpoint failed\.",
            "1.9 – 2.x", "CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION",
            "org.apache.flink.runtime.checkpoint.CheckpointException: Asynchronous task checkpoint failed."),
    # -- checkpoint-expired
    Wording("checkpoint-expired", r"Checkpoint \d+ of job [0-9a-f]+ expired before completing",
            "1.3 – 2.x", "CheckpointCoordinator / CheckpointCanceller (\"Checkpoint {} of job {} expired before completing.\")",
            "Checkpoint 7 of job 0a4f2b7c9d1e3f5a6b8c0d2e4f6a8b0c expired before completing."),
    Wording("checkpoint-expired", r"Checkpoint expired before completing\.",
            "1.9 – 2.x", "CheckpointFailureReason.CHECKPOINT_EXPIRED",
            "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired before completing."),
    # -- checkpoint-tolerable-failure-threshold
    Wording("checkpoint-tolerable-failure-threshold", r"Exceeded checkpoint tolerable failure threshold",
            "1.9 – 2.x", "CheckpointFailureManager.EXCEEDED_CHECKPOINT_TOLERABLE_FAILURE_MESSAGE",
            "org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold."),
    # -- checkpoint-metadata-already-exists
    Wording("checkpoint-metadata-already-exists", r"_metadata already exists|Metadata file already exists|already exists: .*/chk-\d+/_metadata",
            "1.3 – 2.x", "FsCheckpointMetadataOutputStream / LocalFileSystem (FileAlreadyExistsException)",
            "java.io.IOException: Target file file:/ckpt/0a4f2b7c9d1e3f5a6b8c0d2e4f6a8b0c/chk-12/_metadata already exists."),
    # -- memory
    Wording("oom-metaspace", r"OutOfMemoryError:\s*Metaspace",
            "1.3 – 2.x", "the JVM", "java.lang.OutOfMemoryError: Metaspace"),
    Wording("oom-metaspace", r"The metaspace out-of-memory error has occurred",
            "1.10 – 2.x", "TaskManagerExceptionUtils / ClusterEntryPointExceptionUtils (enrichment of the JVM's message)", _TM_META),
    Wording("oom-metaspace", r"'(?:taskmanager|jobmanager)\.memory\.jvm-metaspace\.size' configuration option should be increased",
            "1.10 – 2.x", "TaskManagerExceptionUtils.TM_METASPACE_OOM_ERROR_MESSAGE", _TM_META),
    Wording("oom-direct-memory", r"OutOfMemoryError:\s*Direct buffer memory",
            "1.3 – 2.x", "the JVM (java.nio.Bits)", "java.lang.OutOfMemoryError: Direct buffer memory"),
    Wording("oom-direct-memory", r"The direct out-of-memory error has occurred",
            "1.10 – 2.x", "TaskManagerExceptionUtils / ClusterEntryPointExceptionUtils", _TM_DIRECT),
    Wording("oom-direct-memory", r"Could not allocate enough memory segments for NetworkBufferPool \(required \(M[Bb]\): \d+",
            "1.9 – 2.x", "NetworkBufferPool.<init> (\"(required (Mb): ...\" in 1.9 – 1.11, \"(required (MB): ...\" in 1.20)",
            "java.lang.OutOfMemoryError: Could not allocate enough memory segments for NetworkBufferPool (required (Mb): 1024, allocated (Mb): 931, missing (Mb): 93). Cause: Direct buffer memory."),
    Wording("oom-java-heap", r"OutOfMemoryError:\s*(?:Java heap space|GC overhead limit exceeded)",
            "1.3 – 2.x", "the JVM", "java.lang.OutOfMemoryError: Java heap space"),
    Wording("oom-java-heap", r"A heap space-related out-of-memory error has occurred",
            "1.12 – 2.x", "ClusterEntryPointExceptionUtils (JobManager)",
            "java.lang.OutOfMemoryError: Java heap space. A heap space-related out-of-memory error has occurred. This can mean two things: either Flink Master requires a larger size of JVM heap space or there is a memory leak."),
    Wording("insufficient-network-buffers", r"Insufficient number of network buffers: required \d+, but only \d+ available",
            "1.3 – 2.x", "NetworkBufferPool#requestMemorySegments / tryRedistributeBuffers",
            "java.io.IOException: Insufficient number of network buffers: required 408, but only 203 available. The total number of network buffers is currently set to 2048 of 32768 bytes each."),
    Wording("tm-memory-misconfiguration", r"Either required fine-grained memory \([\w.]+\), or Total Flink Memory size \(.+\), or Total Process Memory size \(.+\) need to be configured explicitly",
            "1.10 – 2.x", "ProcessMemoryUtils#failBecauseRequiredOptionsNotConfigured (TaskManager since 1.10, JobManager since 1.11)",
            "org.apache.flink.configuration.IllegalConfigurationException: Either required fine-grained memory (jobmanager.memory.heap.size), or Total Flink Memory size (Key: 'jobmanager.memory.flink.size' , default: null (fallback keys: [])), or Total Process Memory size (Key: 'jobmanager.memory.process.size' , default: null (fallback keys: [])) need to be configured explicitly."),
    Wording("tm-memory-misconfiguration", r"The configured Total Process Memory size \(.+\) is less than the sum of the derived Total Flink Memory size",
            "1.10 – 2.x", "ProcessMemoryUtils#deriveJvmMetaspaceAndOverheadWithTotalProcessMemory",
            "The configured Total Process Memory size (2.000gb (2147483648 bytes)) is less than the sum of the derived Total Flink Memory size (2.500gb (2684354564 bytes)) and the configured or default JVM Metaspace size  (256.000mb (268435456 bytes))."),
    Wording("tm-memory-misconfiguration", r"Sum of configured (?:Framework Heap Memory|JVM Metaspace) .+ exceed",
            "1.10 – 2.x", "TaskExecutorFlinkMemoryUtils / ProcessMemoryUtils",
            "org.apache.flink.configuration.IllegalConfigurationException: Sum of configured Framework Heap Memory (128.000mb (134217728 bytes)), Framework Off-Heap Memory (128.000mb (134217728 bytes)), Task Off-Heap Memory (0 bytes), Managed Memory (2.000gb (2147483648 bytes)) and Network Memory (1.000gb (1073741824 bytes)) exceed configured Total Flink Memory (2.000gb (2147483648 bytes))."),
    Wording("tm-memory-misconfiguration", r"Inconsistently configured .+ and its min \(.+\), max \(.+\) value",
            "1.10 – 2.x", "ProcessMemoryUtils#getRangeFraction (network or JVM overhead fraction against its min and max; TaskExecutorResourceUtils in 1.10)",
            "org.apache.flink.configuration.IllegalConfigurationException: Inconsistently configured Key: 'taskmanager.memory.network.fraction' , default: 0.1 (fallback keys: [{key=taskmanager.network.memory.fraction, isDeprecated=true}]) (0.10000000149011612) and its min (2.000gb (2147483648 bytes)), max (1024.000mb (1073741824 bytes)) value"),
    # -- cluster
    Wording("taskmanager-lost", r"Connection unexpectedly closed by remote task manager '[^']*'\. This might indicate that the remote task manager was lost",
            "1.5 – 2.x", "CreditBasedPartitionRequestClientHandler#channelInactive (RemoteTransportException)",
            "org.apache.flink.runtime.io.network.netty.exception.RemoteTransportException: Connection unexpectedly closed by remote task manager 'worker-3/10.0.3.17:40123'. This might indicate that the remote task manager was lost."),
    Wording("taskmanager-lost", r"TaskManager with id \S+ is no longer reachable",
            "1.14 – 2.x", "JobMaster (JobMasterException)",
            "org.apache.flink.runtime.jobmaster.JobMasterException: TaskManager with id localhost:46347-426023 is no longer reachable."),
    Wording("tm-heartbeat-timeout", r"(?:The heartbeat of|Heartbeat of) TaskManager with id \S+ timed out",
            "1.5 – 2.x", "JobMaster / ResourceManager heartbeat listeners (\"Heartbeat of TaskManager with id {} timed out.\" up to 1.13, \"The heartbeat of TaskManager with id %s timed out.\" since 1.14)",
            "java.util.concurrent.TimeoutException: The heartbeat of TaskManager with id localhost:39497-b02aeb timed out."),
    Wording("no-resource-available", r"NoResourceAvailableException: (?:Could not acquire the minimum required resources|Could not allocate the required slot within slot request timeout|Could not allocate all requires slots within timeout|Not enough free slots available to run the job)",
            "1.3 – 2.x", "NoResourceAvailableException (legacy scheduler ≤ 1.9, slot pool 1.10 – 1.12, declarative 1.13+)",
            "org.apache.flink.runtime.jobmanager.scheduler.NoResourceAvailableException: Could not acquire the minimum required resources."),
    Wording("restart-strategy-exhausted", r"Recovery is suppressed by \w+RestartBackoffTimeStrategy",
            "1.10 – 2.x", "ExecutionFailureHandler (JobException)",
            "org.apache.flink.runtime.JobException: Recovery is suppressed by FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts=2, backoffTimeMS=3000)"),
    Wording("container-memory-exceeded", r"is running (?:[\d.]+[KMGT]?B )?beyond (?:physical|virtual) memory limits",
            "1.3 – 2.x", "YARN NodeManager (ContainersMonitorImpl), relayed by Flink's YARN resource manager",
            "Container [pid=4711,containerID=container_1573131122047_0007_01_000003] is running 212992B beyond the 'PHYSICAL' memory limit. Current usage: 4.0 GB of 4 GB physical memory used; is running beyond physical memory limits"),
    # -- state backends and storage
    Wording("rocksdb-hardlink-not-supported", r"[Ww]hile link file to \S+/chk-\d+\.tmp/\S+: \S+: (?:Not supported|Operation not permitted)",
            "1.8 – 2.x", "RocksDB native checkpoint (RocksDBException via RocksIncrementalSnapshotStrategy); the OS error depends on the file system (EOPNOTSUPP, or EPERM on vfat)",
            "org.rocksdb.RocksDBException: While link file to /data/rocksdb/db/chk-5.tmp/000012.sst: /data/rocksdb/db/000012.sst: Not supported"),
    Wording("rocksdb-restore-corruption", r"(?:Bad table magic number|Corruption: block checksum mismatch|Sst file size mismatch)",
            "1.3 – 2.x", "RocksDB (RocksDBException while opening restored SST files)",
            "org.rocksdb.RocksDBException: Bad table magic number: expected 9863518390377041911, found 0 in /data/rocksdb/job/db/000042.sst"),
    Wording("hdfs-datanode-failure", r"All datanodes \[?DatanodeInfoWithStorage\[.*\]? are bad\. Aborting|could only be (?:written|replicated) to 0 nodes",
            "1.3 – 2.x", "HDFS client DataStreamer / NameNode (RemoteException)",
            "java.io.IOException: All datanodes [DatanodeInfoWithStorage[10.0.0.7:9866,DS-1,DISK]] are bad. Aborting..."),
    Wording("kafka-offset-commit-failure", r"Failed to commit consumer offsets for checkpoint \d+",
            "1.14 – 2.x", "KafkaSourceReader#notifyCheckpointComplete",
            "Failed to commit consumer offsets for checkpoint 42"),
    Wording("kafka-offset-commit-failure", r"Async Kafka commit failed",
            "1.3 – 1.17", "FlinkKafkaConsumerBase / KafkaFetcher (legacy FlinkKafkaConsumer)",
            "Async Kafka commit failed."),
)


@functools.lru_cache(maxsize=1)
def all_wordings() -> tuple[Wording, ...]:
    """The wordings above and those the runbooks added since declare in their detectors (``Detector.wordings``)."""
    from flink_runbooks.detectors import all_detectors

    return WORDINGS + tuple(w for d in all_detectors() for w in d.wordings)


def wordings_for(runbook: str) -> tuple[Wording, ...]:
    return tuple(w for w in all_wordings() if w.runbook == runbook)


@functools.lru_cache(maxsize=None)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def recognise(text: str) -> list[Wording]:
    """The wordings ``text`` holds (several runbooks may recognise the same text)."""
    return [w for w in all_wordings() if _compiled(w.pattern).search(text)]
